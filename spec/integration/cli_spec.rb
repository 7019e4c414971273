# frozen_string_literal: true

require "spec_helper"
require "open3"
require_relative "../support/capped_fair"
require_relative "../support/rated_fair"

RSpec.describe "sidekiq-fair_tenant command" do
  let(:exe) { File.expand_path("../../exe/sidekiq-fair_tenant", __dir__) }
  let(:app) { File.expand_path("../support/cli_app.rb", __dir__) }
  let(:lib) { File.expand_path("../../lib", __dir__) }

  def cli(*args, url: ENV.fetch("REDIS_URL"))
    env = { "REDIS_URL" => nil, "RUBYOPT" => "-I#{lib}" }
    Open3.capture3(env, Gem.ruby, exe, "--redis-url", url, *args)
  end

  it "sets, gets, lists and deletes runtime limits" do
    out, _err, status = cli("limits", "set", "--tenant", "acme", "--queue", "default", "3")
    expect([status.exitstatus, out]).to eq([0, "limit set; 0 parked job(s) released\n"])
    expect(Sidekiq::FairTenant.limits.get(tenant: "acme", queue: "default")).to eq(3)

    expect(cli("limits", "get", "--tenant", "acme", "--queue", "default")[0]).to eq("3\n")
    expect(cli("limits", "list")[0]).to eq("tenant acme queue default\t3\n")
    expect(cli("limits", "delete", "--tenant", "acme", "--queue", "default")[2].exitstatus).to eq(0)
    expect(cli("limits", "get", "--tenant", "acme", "--queue", "default")[0]).to eq("none\n")
  end

  it "sets, gets, lists and deletes runtime rate windows; a set brings a rate-held tenant back at once" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    RatedFair.build
    out, err, status = cli("rates", "set", "--tenant", "L", "--queue", "fair", "5/3,100/86400")
    expect([status.exitstatus, out]).to eq([0, "rate set; 1 waiting tenant(s) checked again at once\n"]), err
    expect(Sidekiq::FairTenant.rates.get(tenant: "L", queue: "fair"))
      .to eq([{ limit: 5, per: 3.0 }, { limit: 100, per: 86_400.0 }])
    expect(Sidekiq::FairTenant.fair_stats.queue("fair")[:rated]).to eq([])

    expect(cli("rates", "get", "--tenant", "L", "--queue", "fair")[0]).to eq("5/3,100/86400\n")
    expect(cli("rates", "set", "--key", "shop-1", "2/0.5")[0]).to eq("rate set\n")
    expect(cli("rates", "list")[0]).to eq("key shop-1\t2/0.5\ntenant L queue fair\t5/3,100/86400\n")
    expect(cli("rates", "delete", "--key", "shop-1")[2].exitstatus).to eq(0)
    expect(cli("rates", "get", "--key", "shop-1")[0]).to eq("none\n")
    _out, err, status = cli("rates", "set", "--tenant", "L", "0/1")
    expect([status.exitstatus, err]).to match([2, /window 1: limit must be an Integer >= 1/])
  ensure
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  it "sets, gets, lists and deletes fair-queue weights (in Sidekiq's Redis)" do
    out, err, status = cli("weights", "set", "--tenant", "acme", "--queue", "imports", "2.5")
    expect([status.exitstatus, out]).to eq([0, "weight set\n"]), err
    expect(Sidekiq::FairTenant.weights.get(tenant: "acme", queue: "imports")).to eq(2.5)

    expect(cli("weights", "set", "--tenant", "acme", "0")[0]).to eq("weight set\n")
    expect(cli("weights", "get", "--tenant", "acme", "--queue", "imports")[0]).to eq("2.5\n")
    expect(cli("weights", "list")[0]).to eq("tenant acme\t0\ntenant acme queue imports\t2.5\n")
    expect(cli("weights", "delete", "--tenant", "acme")[2].exitstatus).to eq(0)
    expect(cli("weights", "get", "--tenant", "acme")[0]).to eq("none\n")
    _out, err, status = cli("weights", "set", "--tenant", "acme", "lots")
    expect([status.exitstatus, err]).to match([2, /weight must be a number from 0/])
    expect(cli("weights", "get")[1]).to match(/weights need --tenant/)
  end

  it "prints fair queues and a fair queue's waiting tenants" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    2.times do |i|
      Sidekiq::Client.push("class" => "FairJob", "queue" => "fair", "args" => [i], "fair_tenant" => "acme")
    end

    out, err, status = cli("stats", "--fair")
    expect([status.exitstatus, out]).to eq([0, "fair\twaiting 2\tstartable 2\tpaused 0\theld 0" \
                                               "\trate-held 0\tin flight 0\ttenants 1\tcapped 0\trate-capped 0\n"]), err
    out = cli("stats", "--fair", "fair")[0]
    expect(out.lines.last).to match(%r{\Aacme\twaiting 2\toldest [\d.]+s\tweight 1\trunning 0/-\n\z})
    json = JSON.parse(cli("stats", "--fair", "fair", "--json")[0])
    expect(json).to include("queue" => "fair", "backlog" => 2, "tenants" => 1)
  ensure
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  it "prints a fair queue's capped tenants: running/limit, static or elastic, in force or lifted, scope" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    fetch, = CappedFair.build

    out, err, status = cli("stats", "--fair")
    expect([status.exitstatus, out]).to eq([0, "fair\twaiting 5\tstartable 3\tpaused 0\theld 2" \
                                               "\trate-held 0\tin flight 3\ttenants 4\tcapped 3\trate-capped 0\n"]), err
    expect(cli("stats", "--fair", "fair")[0].lines.last(4)).to eq(
      ["3 capped tenant(s):\n",
       "static\trunning 1/1\tstatic cap in force\twaiting 1\ttenant static queue fair\n",
       "keyed\trunning 1/1\tstatic cap in force\twaiting 1\tkey account-keyed\n",
       "elastic\trunning 1/1\telastic cap in force\twaiting 2\ttenant elastic queue fair\n"]
    )
    fetch.retrieve_work # the last tenant under its limit: the elastic cap is lifted
    expect(cli("stats", "--fair", "fair")[0].lines.last).to eq(
      "elastic\trunning 1/1\telastic cap lifted\twaiting 2\ttenant elastic queue fair\n"
    )
    json = JSON.parse(cli("stats", "--fair", "fair", "--json")[0])
    expect(json["capped"].last).to eq("tenant" => "elastic", "running" => 1, "limit" => 1, "elastic" => true,
                                      "in_force" => false, "waiting" => 2,
                                      "scope" => { "tenant" => "elastic", "queue" => "fair" })
  ensure
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  it "prints a fair queue's rate-capped tenants: windows with their starts, next start, waiting, scope" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    RatedFair.build

    out, err, status = cli("stats", "--fair")
    expect([status.exitstatus, out]).to eq([0, "fair\twaiting 1\tstartable 0\tpaused 0\theld 0\trate-held 1" \
                                               "\tin flight 0\ttenants 1\tcapped 0\trate-capped 1\n"]), err
    last = cli("stats", "--fair", "fair")[0].lines.last(2)
    expect(last.first).to eq("1 rate-capped tenant(s):\n")
    expect(last.last).to match(%r{\AL\twindows 2/2 per 3s\tnext start in [\d.]+s\twaiting 1\ttenant L queue fair\n\z})
    json = JSON.parse(cli("stats", "--fair", "fair", "--json")[0])
    expect(json["rated"].first).to include("tenant" => "L", "waiting" => 1,
                                           "windows" => [{ "limit" => 2, "per" => 3.0, "starts" => 2 }])
  ensure
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  it "says why a job still waits: its tenant's jobs ahead, the cap that holds it and its holders" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    _fetch, units = CappedFair.build
    holder = JSON.parse(units.first.job)["jid"]
    jid = ShownStaticCapJob.perform_async("static", 2)

    out, err, status = cli("why", jid)
    expect(status.exitstatus).to eq(0), err
    lines = out.lines(chomp: true)
    expect(lines[0..2]).to eq(["#{jid} waits in fair queue fair, tenant static",
                               "1 of static's 2 waiting job(s) are ahead of it",
                               "static is out of the rotation until its next job's concurrency scope has room"])
    expect(lines[3]).to match(%r{\Aheld by tenant static queue fair: running 1/1; holders: #{holder} \(lease [\d.]+s})
    expect(cli("why", holder)[0]).to match(/\A#{holder} is in flight at \S+ \(queue fair, tenant static\): its heart/)
    json = JSON.parse(cli("why", jid, "--json")[0])
    expect(json).to include("state" => "waiting", "tenant" => "static", "place" => "capped", "ahead_in_tenant" => 1)
    expect(cli("why", "gone")[0]).to match(/\Agone was not found waiting, running/)
    expect(cli("why")[1]).to match(/why needs a JID/)
  ensure
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  it "prints a class's tenants and the greediest ones" do
    5.times { ThrottledJob.perform_async(1) }
    ThrottledJob.perform_async(2)

    out, err, status = cli("-r", app, "stats", "ThrottledJob", "--top", "1")
    expect(status.exitstatus).to eq(0), err
    expect(out.lines.first).to eq("2 active tenant(s)\n")
    expect(out.lines[1]).to start_with("tenant-1\t5/3 per 60.0s, 5/5 per 10.0s\tnext: throttled_4x (throttled)")

    json = JSON.parse(cli("-r", app, "stats", "ThrottledJob", "--tenant", "tenant-2", "--json")[0])
    expect(json["tenants"].first).to include("tenant" => "tenant-2", "next_queue" => "default", "throttled" => false)
  end

  it "prints the :queues: block implied by the rules" do
    out, _err, status = cli("-r", app, "queues")
    expect(status.exitstatus).to eq(0)
    expect(out).to include(":queues:\n  - [default, 4]\n  - [throttled_2x, 2]\n")
    expect(out).to include("# ThrottledJob: default -> throttled_2x, throttled_4x")
  end

  it "offers the same block as `rake fair_tenant:queues`" do
    script = "require 'rake'; require #{app.dump}; require 'sidekiq/fair_tenant/tasks'; " \
             "Rake::Task['fair_tenant:queues'].invoke"
    out, err, status = Open3.capture3({ "RUBYOPT" => "-I#{lib}" }, Gem.ruby, "-e", script)
    expect(status.exitstatus).to eq(0), err
    expect(out).to eq(cli("-r", app, "queues")[0])
  end

  it "exits 2 with a clear message on bad usage, changing nothing" do
    [
      [%w[limits set --tenant acme lots], /limit must be an Integer/],
      [%w[limits set --tenant acme --key k 1], /give tenant: .* or key:/],
      [%w[limits frob], /unknown limits action "frob"/],
      [%w[bogus], /unknown command "bogus"/],
      [%w[stats NoSuchJob], /unknown job class "NoSuchJob"/],
      [%w[limits list --nope], /invalid option: --nope/],
      [[], /no command given/]
    ].each do |args, message|
      _out, err, status = cli(*args)
      expect(status.exitstatus).to eq(2), "#{args.inspect}: #{err}"
      expect(err).to match(message)
    end
    expect(redis.keys("sidekiq-fair_tenant:*")).to be_empty
  end

  it "exits 1 when Redis cannot be reached, naming the server without its password" do
    port = RedisServer.free_port
    _out, err, status = cli("limits", "list", url: "redis://:secret@127.0.0.1:#{port}/0")
    expect(status.exitstatus).to eq(1)
    expect(err).to include("ConnectionError").and include("127.0.0.1:#{port}")
    expect(err).not_to include("secret")
  end

  it "prints usage with --help" do
    out, _err, status = cli("--help")
    expect(status.exitstatus).to eq(0)
    expect(out).to include("Usage: sidekiq-fair_tenant")
  end
end

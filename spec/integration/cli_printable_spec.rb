# frozen_string_literal: true

require "spec_helper"
require "open3"
require_relative "../support/capped_fair"
require_relative "../support/rated_fair"

# Tenant names (and keys, queue names) are customer data: the command shows them with control characters
# escaped, never as escape sequences for the operator's terminal; `--json` carries them exactly.
module HostileNames
  RED = "\e[31mRED\e[0m\e]0;pwned\a"
  LINE = "acme\nfake\twaiting 0"
  BIDI = "evil\u202Egnp.exe\u2066"
  SLASH = "back\\slash\u009b\x7f"
  CLIP = "\e]52;c;aGk=\a"
  SHOWN = {
    RED => '\e[31mRED\e[0m\e]0;pwned\x07', LINE => 'acme\nfake\twaiting 0',
    BIDI => 'evil\u{202E}gnp.exe\u{2066}', SLASH => 'back\\\\slash\u{009B}\x7F', CLIP => '\e]52;c;aGk=\x07'
  }.freeze
end

RSpec.describe "sidekiq-fair_tenant command with hostile job data" do
  include HostileNames

  let(:exe) { File.expand_path("../../exe/sidekiq-fair_tenant", __dir__) }
  let(:app) { File.expand_path("../support/cli_app.rb", __dir__) }
  let(:lib) { File.expand_path("../../lib", __dir__) }

  # Runs the command; its standard output and error must be printable: valid UTF-8 with no control character
  # but the tabs and line ends of its own columns and lines, no DEL, C1 control or bidi override.
  def cli(*args, status: 0)
    env = { "REDIS_URL" => nil, "RUBYOPT" => "-I#{lib}" }
    out, err, done = Open3.capture3(env, Gem.ruby, exe, "--redis-url", ENV.fetch("REDIS_URL"), *args)
    expect(done.exitstatus).to eq(status), "#{args.inspect}: #{err}"
    [out, err].each { |text| expect_printable(text, args) }
    out
  end

  def expect_printable(text, args)
    text = text.dup.force_encoding(Encoding::UTF_8)
    expect(text).to be_valid_encoding, args.inspect
    expect(text.b).not_to match(/[\x00-\x08\x0b-\x1f\x7f]/n), "#{args.inspect}: #{text.inspect}"
    expect(text).not_to match(/[\u0080-\u009f\u202a-\u202e\u2066-\u2069]/), "#{args.inspect}: #{text.inspect}"
  end

  def shown(name) = HostileNames::SHOWN.fetch(name)

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] } }
  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  it "shows a fair queue's hostile tenants, a capped one's scope and holders escaped; --json exactly" do
    holder, jid = Array.new(2) { |i| ShownStaticCapJob.perform_async(HostileNames::RED, i) }
    ShownUncappedJob.perform_async(HostileNames::LINE, 0)
    ShownUncappedJob.perform_async(HostileNames::BIDI, 0)
    expect(JSON.parse(Sidekiq::FairTenant::FairFetch.new(queues: %w[fair]).retrieve_work.job)["jid"]).to eq(holder)

    lines = cli("stats", "--fair", "fair").lines(chomp: true)
    expect(lines.grep(/\A#{Regexp.escape(shown(HostileNames::LINE))}\twaiting 1\t/).size).to eq(1)
    expect(lines).to include("#{shown(HostileNames::RED)}\trunning 1/1\tstatic cap in force\twaiting 1\t" \
                             "tenant #{shown(HostileNames::RED)} queue fair")
    expect(lines.grep(/\A#{Regexp.escape(shown(HostileNames::BIDI))}\twaiting 1\t/).size).to eq(1)
    expect(lines.grep(/\Afake/)).to be_empty
    json = JSON.parse(cli("stats", "--fair", "fair", "--json"))
    expect(json["page"].map { |t| t["tenant"] })
      .to contain_exactly(HostileNames::RED, HostileNames::LINE, HostileNames::BIDI)
    expect(json["capped"].first["scope"]).to eq("tenant" => HostileNames::RED, "queue" => "fair")

    scopes = cli("stats", "--concurrency")
    expect(scopes).to start_with("tenant #{shown(HostileNames::RED)} queue fair\trunning 1/1\tparked 0")
    expect(JSON.parse(cli("stats", "--concurrency", "--json")).first).to include("tenant" => HostileNames::RED)

    why = cli("why", jid).lines(chomp: true)
    expect(why.first).to eq("#{jid} waits in fair queue fair, tenant #{shown(HostileNames::RED)}")
    expect(why.last).to start_with("held by tenant #{shown(HostileNames::RED)} queue fair: running 1/1; " \
                                   "holders: #{holder}")
    expect(JSON.parse(cli("why", jid, "--json"))).to include("tenant" => HostileNames::RED)
    expect(cli("why", holder)).to include("(queue fair, tenant #{shown(HostileNames::RED)})")
  end

  # A name that is not ASCII: its scope's strings go into the job (ruby_api/helpers/convert.rs `text`: UTF-8,
  # which Ruby 3.3's JSON takes; binary ones it refused).
  it "shows a hostile rate-capped tenant escaped" do
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "printable:1:a").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
    3.times { |i| SlowRateJob.perform_async(HostileNames::BIDI, i, 0) }
    Array.new(3) { fetch.retrieve_work&.tap(&:acknowledge) }
    fetch.flush_acks

    out = cli("stats", "--fair", "fair")
    expect(out).to include("1 rate-capped tenant(s):\n#{shown(HostileNames::BIDI)}\twindows 2/2 per 3s")
    expect(JSON.parse(cli("stats", "--fair", "fair", "--json"))["rated"].first)
      .to include("tenant" => HostileNames::BIDI)
  end

  it "shows a hostile queue name of a plain or scheduled job escaped" do
    queue = "plain#{HostileNames::CLIP}"
    plain = Sidekiq::Client.push("class" => "ShownUncappedJob", "queue" => queue, "args" => [HostileNames::SLASH])
    later = Sidekiq::Client.push("class" => "ShownUncappedJob", "queue" => queue, "args" => [HostileNames::SLASH],
                                 "at" => Time.now.to_f + 3600)

    expect(cli("why", plain)).to start_with("#{plain} waits in queue plain#{shown(HostileNames::CLIP)}, not fair")
    expect(cli("why", later)).to match(/ \(queue plain#{Regexp.escape(shown(HostileNames::CLIP))}\)\n\z/)
    expect(JSON.parse(cli("why", later, "--json"))).to include("queue" => queue)
  end

  it "lists hostile tenants and keys of runtime limits, rates and weights escaped" do
    Sidekiq::FairTenant.limits.set(3, tenant: HostileNames::RED, queue: "fair")
    Sidekiq::FairTenant.limits.set(2, key: HostileNames::CLIP)
    Sidekiq::FairTenant.rates.set("5/1", tenant: HostileNames::BIDI)
    Sidekiq::FairTenant.weights.set(2, tenant: HostileNames::SLASH, queue: "fair")

    expect(cli("limits", "list").lines)
      .to contain_exactly("key #{shown(HostileNames::CLIP)}\t2\n", "tenant #{shown(HostileNames::RED)} queue fair\t3\n")
    expect(cli("rates", "list")).to eq("tenant #{shown(HostileNames::BIDI)}\t5/1\n")
    expect(cli("weights", "list")).to eq("tenant #{shown(HostileNames::SLASH)} queue fair\t2\n")
    expect(cli("limits", "get", "--key", HostileNames::CLIP)).to eq("2\n")
  end

  it "shows a job class's hostile tenants escaped, exits 0, and --json carries them exactly" do
    5.times { ThrottledJob.perform_async(HostileNames::RED) }
    ThrottledJob.perform_async(HostileNames::LINE)
    ThrottledJob.perform_async(HostileNames::BIDI)

    lines = cli("-r", app, "stats", "ThrottledJob", "--top", "3").lines(chomp: true)
    expect(lines.size).to eq(4)
    expect(lines[0]).to eq("3 active tenant(s)")
    expect(lines[1]).to start_with("tenant-#{shown(HostileNames::RED)}\t5/3 per 60.0s")
    expect(lines[2..]).to contain_exactly(start_with("tenant-#{shown(HostileNames::LINE)}\t"),
                                          start_with("tenant-#{shown(HostileNames::BIDI)}\t"))
    json = JSON.parse(cli("-r", app, "stats", "ThrottledJob", "--tenant", "tenant-#{HostileNames::RED}", "--json"))
    expect(json["tenants"].first).to include("tenant" => "tenant-#{HostileNames::RED}", "throttled" => true)
    json = JSON.parse(cli("-r", app, "stats", "ThrottledJob", "--top", "3", "--json"))
    expect(json["tenants"].map { |t| t["tenant"] })
      .to contain_exactly(*[HostileNames::RED, HostileNames::LINE, HostileNames::BIDI].map { |t| "tenant-#{t}" })
    expect(cli("-r", app, "stats", "ThrottledJob", "--tenant", "tenant-#{HostileNames::LINE}"))
      .to start_with("1 active tenant(s)\ntenant-#{shown(HostileNames::LINE)}\t")
  end

  it "shows hostile text in error messages escaped" do
    expect(cli("limits", "set", "--tenant", "acme", HostileNames::RED, status: 2)).to eq("")
    expect(cli(HostileNames::CLIP, status: 2)).to eq("")
  end
end

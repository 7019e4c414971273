# frozen_string_literal: true

require "spec_helper"
require "open3"
require "sidekiq/fair_tenant/cli"

# A job of several concurrency scopes on a plain queue (issue 32), its scripts through SlotCalls as the server
# middleware sends them (acquire_all.lua, release_all.lua; no server process): all its slots at once or none, a
# re-sent call takes nothing twice, a lost reply leaves no copy to run again and no slot held, and what sees a scope
# (stats, the CLI, runtime limits) sees each of them.
RSpec.describe "Several concurrency scopes on a plain queue, call by call" do
  let(:tenant) { Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "plain") }
  let(:api) { Sidekiq::FairTenant::Native::Slots.key_scope("partner-api") }
  let(:calls) { Sidekiq::FairTenant::Concurrency::SlotCalls }

  before { redis.flushdb }

  # The tenant's scope (limit 2) and the shared one (limit 1), in `order`.
  def several(jid, run, order: %i[tenant api])
    limits = { tenant: 2, api: 1 }
    slots = order.map do |name|
      Sidekiq::FairTenant::ServerMiddleware::Slot.new(*send(name), jid, 60_000, limits.fetch(name), run)
    end
    calls::Several.new(slots)
  end

  def payload(jid) = JSON.generate("class" => "SharedJob", "queue" => "plain", "jid" => jid, "args" => [])
  def acquire(jid, run, at: 1.0, **options) = calls.acquire_all(several(jid, run, **options), payload(jid), at)
  def holders(scope) = Sidekiq::FairTenant.stats.scope(*scope)[:holders].map { |h| h[:jid] }
  def parked(scope) = Sidekiq::FairTenant.stats.scope(*scope)[:parked]
  def queued = redis.lrange("queue:plain", 0, -1).map { |p| JSON.parse(p)["jid"] }
  def others = redis.keys("*:others")

  it "takes every slot at once, or parks on the full scope holding none, and is handed all of them together" do
    expect(acquire("a", "ra")).to eq(:acquired)
    expect([holders(tenant), holders(api)]).to eq([["a"], ["a"]])
    expect(acquire("b", "rb", at: 2.0)).to eq(:parked) # its tenant has room (1/2), the shared scope none (1/1)
    expect([holders(tenant), parked(api), parked(tenant)]).to eq([["a"], 1, 0])

    expect(calls.release(several("a", "ra"))).to eq(1)
    expect(queued).to eq(["b"])
    expect([holders(tenant), holders(api), others]).to eq([["b"], ["b"], []])
    expect(acquire("b", "rb2")).to eq(:held) # the copy, fetched, claims both
    expect(calls.release(several("b", "rb2"))).to eq(0)
    expect([holders(tenant), holders(api)]).to eq([[], []])
  end

  it "moves a parked job to the scope that still refuses it, and never deadlocks on two orders" do
    expect(acquire("x", "rx", order: %i[api tenant])).to eq(:acquired)
    # Its tenant full too: two more of the same tenant, the second in the other order.
    expect(acquire("y", "ry", at: 2.0)).to eq(:parked)
    expect(acquire("z", "rz", at: 3.0, order: %i[api tenant])).to eq(:parked)
    expect([parked(api), parked(tenant)]).to eq([2, 0])
    Sidekiq::FairTenant.limits.set(1, tenant: "acme", queue: "plain") # (x holds the one slot now)
    expect(calls.release(several("x", "rx", order: %i[api tenant]))).to eq(1)
    expect([queued, parked(api), parked(tenant)]).to eq([["y"], 0, 1]) # z moved to wait on its tenant
    redis.rpop("queue:plain") # (fetched)
    expect(acquire("y", "ry2")).to eq(:held)
    calls.release(several("y", "ry2"))
    expect([queued, holders(api), holders(tenant)]).to eq([["z"], ["z"], ["z"]])
  end

  it "answers why for a parked job with the scope it waits on, as that scope changes" do
    expect(acquire("x", "rx", order: %i[api tenant])).to eq(:acquired)
    expect(acquire("y", "ry", at: 2.0)).to eq(:parked)
    expect(acquire("z", "rz", at: 3.0)).to eq(:parked)
    why = Sidekiq::FairTenant.why("z")
    expect(why).to include(state: :parked)
    expect(why[:held_by][:concurrency]).to include(scope: { key: "partner-api" }, running: 1, limit: 1, parked: 2)
    expect(why[:held_by][:concurrency][:holders].map { |h| h[:jid] }).to eq(["x"])
    left = why[:held_by][:concurrency][:holders][0][:lease_left]
    expect(Sidekiq::FairTenant::CLI::WhyText.lines(why)).to eq(
      ["z is parked (queue not fair) until its concurrency scope has room",
       "held by key partner-api: running 1/1; holders: x (lease #{left}s left)"]
    )

    Sidekiq::FairTenant.limits.set(1, tenant: "acme", queue: "plain")
    calls.release(several("x", "rx", order: %i[api tenant])) # y handed over; z moves to wait on its tenant
    expect(Sidekiq::FairTenant.why("z")[:held_by][:concurrency])
      .to include(scope: { tenant: "acme", queue: "plain" }, running: 1, limit: 1, parked: 1)
    expect(Sidekiq::FairTenant.why("y")).to include(state: :queued, queue: "plain")
  end

  it "never parks twice nor takes two slots for a re-sent acquire" do
    expect(acquire("a", "ra")).to eq(:acquired)
    expect(acquire("a", "ra")).to eq(:held)
    expect(acquire("b", "rb", at: 2.0)).to eq(:parked)
    expect(acquire("b", "rb", at: 2.0)).to eq(:parked)
    expect([holders(tenant), holders(api), parked(api)]).to eq([["a"], ["a"], 1])
  end

  it "never runs a job twice when a parking run's call is re-sent after another run claimed its handed-over copy" do
    acquire("a", "ra")
    expect(acquire("b", "rb", at: 2.0)).to eq(:parked) # its reply lost: the client sends the call again, later
    calls.release(several("a", "ra"))
    redis.rpop("queue:plain")
    expect(acquire("b", "rb2")).to eq(:held) # the copy, fetched by another thread, runs
    expect(acquire("b", "rb", at: 2.0)).to eq(:dropped) # the re-sent call: served already, parks nothing
    expect(calls.release(several("b", "rb2"))).to eq(0)
    expect([queued, parked(api), holders(tenant), holders(api)]).to eq([[], 0, [], []])
  end

  it "gives back what a lost acquire left: its slots, its parked copy, its copy handed over and not fetched" do
    acquire("a", "ra") # its reply lost: a ran without its slots
    calls.forget(several("a", "ra"), payload("a"), "plain")
    expect([holders(tenant), holders(api)]).to eq([[], []])

    acquire("h", "rh")
    acquire("b", "rb", at: 2.0) # lost, parked
    calls.forget(several("b", "rb"), payload("b"), "plain")
    expect([parked(api), others]).to eq([0, []])

    acquire("c", "rc", at: 3.0) # lost too, and handed over before the give-back came
    calls.release(several("h", "rh"))
    expect(queued).to eq(["c"])
    calls.forget(several("c", "rc"), payload("c"), "plain")
    expect([queued, holders(tenant), holders(api)]).to eq([[], [], []])
  end

  it "drops a handed-over copy fetched before the give-back, and a lost acquire that comes after it" do
    acquire("h", "rh")
    acquire("c", "rc", at: 2.0) # lost, parked, handed over, and its copy fetched before the give-back
    calls.release(several("h", "rh"))
    redis.rpop("queue:plain")
    calls.forget(several("c", "rc"), payload("c"), "plain")
    expect(acquire("c", "rc2")).to eq(:dropped) # the copy ran already (as run rc): it frees both and is not run
    expect([holders(tenant), holders(api)]).to eq([[], []])

    calls.forget(several("d", "rd"), payload("d"), "plain") # given up before its acquire reached Redis
    expect(acquire("d", "rd")).to eq(:dropped)
    expect([holders(tenant), holders(api), parked(api)]).to eq([[], [], 0])
  end

  it "shows each scope in the CLI's concurrency list, and a limit raised on the shared one hands its job over" do
    acquire("a", "ra")
    acquire("b", "rb", at: 2.0)
    exe = File.expand_path("../../exe/sidekiq-fair_tenant", __dir__)
    env = { "REDIS_URL" => nil, "RUBYOPT" => "-I#{File.expand_path("../../lib", __dir__)}" }
    cli = ->(*args) { Open3.capture3(env, Gem.ruby, exe, "--redis-url", ENV.fetch("REDIS_URL"), *args) }

    out, err, status = cli.call("stats", "--concurrency")
    expect(status.exitstatus).to eq(0), err
    expect(out).to match(%r{^key partner-api\trunning 1/1\tparked 1 oldest}) # (its limit known once a job parked)
    expect(out).to match(%r{^tenant acme queue plain\trunning 1/default\tparked 0})
    expect(cli.call("limits", "set", "--key", "partner-api", "2")[0]).to eq("limit set; 1 parked job(s) released\n")
    expect([queued, holders(api).sort, holders(tenant).sort]).to eq([["b"], %w[a b], %w[a b]])
  end
end

# frozen_string_literal: true

require "spec_helper"

# Slots on plain queues per run of a job (the scripts through SlotCalls, as the server middleware sends them, no
# server process): each run holds its own slot, a re-sent call takes nothing twice, a lost reply leaves no copy
# to run again, each parked job is handed a slot under its own limit, and hand-overs are bounded per call.
RSpec.describe "Concurrency slots per run" do
  let(:scope) { Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default") }
  let(:calls) { Sidekiq::FairTenant::Concurrency::SlotCalls }

  def slot(jid, run, limit: 1) = Sidekiq::FairTenant::ServerMiddleware::Slot.new(*scope, jid, 60_000, limit, run)
  def payload(jid) = JSON.generate("class" => "SlotJob", "queue" => "default", "jid" => jid, "args" => [])
  def acquire(jid, run, limit: 1, at: 1.0) = calls.acquire(slot(jid, run, limit: limit), payload(jid), at)
  def details = Sidekiq::FairTenant.stats.scope(*scope)
  def holders = details[:holders].map { |h| h[:jid] }
  def queued = redis.lrange("queue:default", 0, -1).map { |p| JSON.parse(p)["jid"] }

  # One call of set_limit.lua for the tenant, as Limits#set sends it: [handed, more].
  def limit_call_once(limit)
    native = Sidekiq::FairTenant::Native::Limits
    call = native.set_call(*native.limit_target("acme", nil, nil), limit)
    Sidekiq::FairTenant::SidekiqRedis.with do |conn|
      Sidekiq::FairTenant::ScriptRunner.run(conn, "set_limit", *call)
    end
  end

  it "gives a second run of a jid no slot of the first run's, and a release by a stale run frees nothing" do
    expect(acquire("j", "r1")).to eq(:acquired)
    expect(acquire("j", "r2", at: 2.0)).to eq(:parked) # Sidekiq pushed the job back while r1 still runs it
    expect(calls.release(slot("j", "r2"))).to eq(0)
    expect(holders).to eq(["j"])
    expect(calls.release(slot("j", "r1"))).to eq(1) # r2's copy is handed the slot
    expect(queued).to eq(["j"])
    expect(acquire("j", "r3")).to eq(:held) # the copy, fetched, claims it
  end

  it "never parks twice nor takes two slots for a re-sent acquire" do
    expect(acquire("a", "ra")).to eq(:acquired)
    expect(acquire("a", "ra")).to eq(:held)
    expect(acquire("b", "rb", at: 2.0)).to eq(:parked)
    expect(acquire("b", "rb", at: 2.0)).to eq(:parked)
    expect([holders, details[:parked]]).to eq([["a"], 1])
  end

  it "never runs a job twice when a parking run's call is re-sent after another run claimed its handed-over copy" do
    acquire("a", "ra")
    expect(acquire("b", "rb", at: 2.0)).to eq(:parked) # its reply lost: the client sends the call again, later
    calls.release(slot("a", "ra"))
    expect(queued).to eq(["b"])
    redis.rpop("queue:default")
    expect(acquire("b", "rb2")).to eq(:held) # the copy, fetched by another thread, runs
    expect(acquire("b", "rb", at: 2.0)).to eq(:dropped) # the re-sent call: served already, parks nothing
    expect(calls.release(slot("b", "rb2"))).to eq(0)
    expect([queued, details[:parked], holders]).to eq([[], 0, []])
  end

  it "takes back what a lost acquire left: its slot, its parked copy, its copy handed over but not fetched" do
    acquire("a", "ra")
    acquire("b", "rb", at: 2.0) # its reply lost: b ran without its slot
    calls.forget(slot("b", "rb"), payload("b"), "default")
    expect(details[:parked]).to eq(0)

    acquire("c", "rc", at: 3.0) # lost too, and handed over before the give-back came
    calls.release(slot("a", "ra"))
    expect(queued).to eq(["c"])
    calls.forget(slot("c", "rc"), payload("c"), "default")
    expect([queued, holders]).to eq([[], []])
  end

  it "drops a handed-over copy fetched before the give-back, and a lost acquire that comes after it" do
    acquire("a", "ra")
    acquire("c", "rc", at: 3.0) # its reply lost
    calls.release(slot("a", "ra"))
    redis.rpop("queue:default") # a thread fetched the copy
    calls.forget(slot("c", "rc"), payload("c"), "default")
    expect(acquire("c", "fetched")).to eq(:dropped)
    expect(holders).to be_empty

    calls.forget(slot("d", "rd"), payload("d"), "default") # its acquire has not reached Redis yet
    expect(acquire("d", "rd")).to eq(:dropped)
    expect(acquire("d", "rd")).to eq(:dropped) # its re-sent call too
    expect([holders, details[:parked]]).to eq([[], 0])
  end

  it "hands a parked job a slot under its own limit, whichever job frees it" do
    3.times { |i| expect(acquire("w#{i}", "w#{i}", limit: 3)).to eq(:acquired) }
    expect(acquire("n", "n", limit: 1, at: 2.0)).to eq(:parked)
    calls.release(slot("w0", "w0", limit: 3))
    expect(queued).to be_empty # 2 holders: more than the parked job's own limit of 1
    calls.release(slot("w1", "w1", limit: 3))
    calls.release(slot("w2", "w2", limit: 3))
    expect(queued).to eq(["n"])
  end

  it "hands over at most HAND_OVER_BATCH jobs per call; a raised limit goes on until all are handed over" do
    batch = Sidekiq::FairTenant::Native::Names::HAND_OVER_BATCH
    Sidekiq::FairTenant.limits.set(0, tenant: "acme")
    (batch + 50).times { |i| acquire("p#{i}", "p#{i}", at: i + 1.0) }
    expect(limit_call_once(batch * 2)).to eq([batch, 1]) # one call: the first batch, and "more"
    expect(Sidekiq::FairTenant.limits.set(batch * 2, tenant: "acme")).to eq(50)
    expect(redis.llen("queue:default")).to eq(batch + 50)
  ensure
    Sidekiq::FairTenant.limits.delete(tenant: "acme")
  end
end

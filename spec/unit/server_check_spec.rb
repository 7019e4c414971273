# frozen_string_literal: true

require "spec_helper"

# The boot check's rule through the binding (Native::ServerCheck; the rule's cases are cargo tests in
# server_check.rs): the spec's real server passes, and INFO as an older Redis writes it is refused by name.
RSpec.describe "Native::ServerCheck" do
  let(:check) { Sidekiq::FairTenant::Native::ServerCheck }

  it "passes the spec's own server, fair queues or not, and names it" do
    info = Sidekiq.redis { |conn| conn.call("INFO", "server") }
    expect(check.problem(info, true)).to be_nil
    expect(check.problem(info, false)).to be_nil
    name = RedisServer.binary.delete_suffix("-server")
    expect(check.describe(info)).to start_with("#{name} #{RedisServer.version_of(RedisServer.binary)}")
  end

  it "refuses fair queues on Redis 6.0, naming its version and the need, and lets its slots and routing run" do
    info = "# Server\r\nredis_version:6.0.16\r\nredis_mode:standalone\r\n"
    expect(check.problem(info, false)).to be_nil
    expect(check.problem(info, true))
      .to eq("the Redis server is redis 6.0.16, which lacks ZADD with LT (Redis 6.2.0+) for fair queues " \
             "(lua/fair/serve.lua): use Redis 6.2.0 or later (or Valkey)")
  end
end

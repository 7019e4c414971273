# frozen_string_literal: true

require "spec_helper"
require "capybara"
require "securerandom"
require_relative "../support/web_server"
require_relative "../support/fair_app"

# Sidekiq's Web UI (a real Sidekiq::Web Rack app, the gem's Web extension loaded, called with Rack::MockRequest)
# with `default` a fair queue holding jobs: 1 in Sidekiq's own list, 5 in the fair backlog, acme's 3 enqueued
# 300 s ago. Every page answers, and the figures Sidekiq shows of queue sizes and latency count the fair backlog.
RSpec.describe "Sidekiq's Web UI with a fair default queue" do
  let(:web) { Rack::MockRequest.new(WebServer.new.app) }

  before do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[default] }
    seed
  end

  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  # A job pushed as FairQueues::Push does, enqueued `age` seconds ago (Sidekiq 8 writes enqueued_at in milliseconds).
  def push_old(tenant, index, age)
    fair = Sidekiq::FairTenant::FairQueues
    at = Time.now.to_f - age
    stamp = fair.now.is_a?(Integer) ? (at * 1000).round : at
    payload = { "class" => "FairJob", "queue" => "default", "args" => [tenant, index, 0], "retry" => 3,
                "jid" => SecureRandom.hex(12), "created_at" => stamp, "enqueued_at" => stamp }
    Sidekiq.redis { |conn| fair.push(conn, "default", [[tenant, Sidekiq.dump_json(payload)]], at) }
  end

  def seed
    redis.lpush("queue:default", JSON.generate("class" => "FairJob", "queue" => "default", "args" => ["raw", 0, 0],
                                               "jid" => "raw-1", "enqueued_at" => Time.now.to_f))
    3.times { |i| push_old("acme", i, 300) }
    2.times { |i| FairJob.set(queue: "default").perform_async("beta", i, 0) }
  end

  def get(path)
    response = web.get(path)
    expect(response.status).to eq(200), "GET #{path}: #{response.status}"
    response
  end

  def page(path) = Capybara.string(get(path).body)

  # Sidekiq 7.2.3 to 8.0.1 answer HEAD / with default's size, the others with an empty body.
  def sized_heartbeat? = Gem::Version.new(Sidekiq::VERSION).between?(*%w[7.2.3 8.0.1].map { |v| Gem::Version.new(v) })

  it "answers HEAD / as Sidekiq does: on 7.2.3 to 8.0.1 with default's size, fair backlog included" do
    expect(redis.llen("queue:default")).to eq(1)
    response = web.request("HEAD", "/")

    expect(response.status).to eq(200)
    expect(response.body).to eq(sized_heartbeat? ? "6" : "")
    expect(Sidekiq::Queue.new("default").size).to eq(6)
  end

  it "answers every page, and shows fair-aware sizes and latency where Sidekiq shows them" do
    version = Gem::Version.new(Sidekiq::VERSION)
    pages = %w[/busy /retries /scheduled /morgue]
    pages += %w[/metrics /metrics/FairJob] if version >= Gem::Version.new("7")
    pages << "/profiles" if version >= Gem::Version.new("8")
    pages.each { |path| get(path) }

    expect(page("/").find("#txtEnqueued").text.strip).to eq("6")
    row = page("/queues").find(:xpath, "//tr[td/a[normalize-space()='default']]")
    _, size, latency = row.all("td").map { |cell| cell.text.strip }
    expect(size).to eq("6")
    # Seconds, and on 60 s or more how long ago ("5 minutes ago"), before or after them by version.
    expect(latency.scan(/\d+(?:\.\d+)?/).map(&:to_f).max).to be >= 299
    expect(page("/queues/default").find(".badge").text.strip).to eq("6")
  end

  it "serves fair-aware /stats and /stats/queues" do
    stats = JSON.parse(get("/stats").body)["sidekiq"]
    expect(stats["enqueued"]).to eq(6)
    expect(stats["default_latency"]).to be >= 299
    expect(JSON.parse(get("/stats/queues").body)).to eq("default" => 6)
  end
end

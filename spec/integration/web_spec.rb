# frozen_string_literal: true

require "spec_helper"
require_relative "../support/web_server"
require_relative "../support/browser"
require_relative "../support/capped_fair"
require_relative "../support/rated_fair"

RSpec.describe "Sidekiq Web tab \"Fair Tenant\"" do
  before(:all) do
    skip "Debian's chromium and chromium-driver are not installed (bin/setup installs them)" unless Browser.available?
    @server = WebServer.new.start
    @browser = Browser.session(@server.url)
  end

  after(:all) do
    @browser&.driver&.quit
    @server&.stop
  end

  let(:browser) { @browser }

  def seed
    6.times { ThrottledJob.perform_async(1) }
    2.times { ThrottledJob.perform_async(2) }
    slots = Sidekiq::FairTenant.native.slots
    tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default")
    slots.acquire(tag, sub, "running-1", 60_000, 1, { jid: "running-1", queue: "default" }.to_json, 1.0)
    slots.acquire(tag, sub, "waiting-1", 60_000, 1, { jid: "waiting-1", queue: "default" }.to_json,
                  Time.now.to_f - 42)
    Sidekiq::FairTenant.limits.set(4, key: "customer-9")
  end

  it "renders tenants, concurrency scopes and limits from Redis" do
    seed
    browser.visit("/fair_tenant?class=ThrottledJob")

    expect(browser).to have_link("Fair Tenant")
    tenants = browser.find("#fair-tenant-tenants")
    first = tenants.all("tbody tr").first
    expect(first.all("td").map(&:text).first(5)).to eq(["tenant-1", "6 / 3", "6 / 5", "yes", "throttled_4x"])
    expect(tenants).to have_css("tr", text: %r{tenant-2\s+2 / 3\s+2 / 5\s+no\s+default})
    scopes = browser.find("#fair-tenant-scopes")
    expect(scopes).to have_text("tenant acme, queue default")
    expect(scopes).to have_css("td", text: "1 / 1")
    expect(scopes).to have_css("td", text: /\A4[2-5]\.\ds\z/)
    expect(browser.find("#fair-tenant-limits")).to have_text("key customer-9")

    browser.save_screenshot(File.expand_path("../../docs/web-tab.png", __dir__)) if ENV["FAIR_TENANT_SCREENSHOT"]
  end

  it "lists every scope a job of several holds, the shared key by its name" do
    redis.flushdb
    slot = Sidekiq::FairTenant::ServerMiddleware::Slot
    slots = [[Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "plain"), 2],
             [Sidekiq::FairTenant::Native::Slots.key_scope("partner-api"), 3]]
    held = slots.map { |scope, limit| slot.new(*scope, "j1", 60_000, limit, "r1") }
    several = Sidekiq::FairTenant::Concurrency::SlotCalls::Several.new(held)
    payload = JSON.generate("class" => "SharedJob", "queue" => "plain", "jid" => "j1", "args" => [])
    expect(Sidekiq::FairTenant::Concurrency::SlotCalls.acquire_all(several, payload, Time.now.to_f)).to eq(:acquired)

    browser.visit("/fair_tenant")
    scopes = browser.find("#fair-tenant-scopes")
    expect(scopes).to have_text("tenant acme, queue plain")
    expect(scopes).to have_text("key partner-api")
    expect(scopes.all("tbody tr").size).to eq(2)
  end

  it "sets a limit through the form (CSRF token included) and deletes it" do
    browser.visit("/fair_tenant")
    browser.fill_in("ft-tenant", with: "acme")
    browser.fill_in("ft-queue", with: "default")
    browser.fill_in("ft-limit", with: "7")
    browser.click_button("Set limit")

    expect(browser).to have_css("#fair-tenant-notice", text: "Limit set")
    expect(Sidekiq::FairTenant.limits.get(tenant: "acme", queue: "default")).to eq(7)
    expect(redis.hget("sidekiq-fair_tenant:limits:6:t:acme", "q:default")).to eq("7")

    browser.find("#fair-tenant-limits").click_button("Delete")
    expect(browser).to have_css("#fair-tenant-notice", text: "Limit deleted")
    expect(Sidekiq::FairTenant.limits.list).to be_empty
  end

  it "sets and deletes a runtime rate through the form, and shows a bad one's error" do
    browser.visit("/fair_tenant")
    browser.fill_in("ft-rate-tenant", with: "acme")
    browser.fill_in("ft-rate-windows", with: "5/1,10000/86400")
    browser.click_button("Set rate")
    expect(browser).to have_css("#fair-tenant-notice", text: "Rate set")
    expect(Sidekiq::FairTenant.rates.get(tenant: "acme"))
      .to eq([{ limit: 5, per: 1.0 }, { limit: 10_000, per: 86_400.0 }])
    expect(browser.find("#fair-tenant-rates")).to have_css("tr", text: %r{tenant acme\s+5/1,10000/86400})

    browser.find("#fair-tenant-rates").click_button("Delete")
    expect(browser).to have_css("#fair-tenant-notice", text: "Rate deleted")
    expect(Sidekiq::FairTenant.rates.list).to be_empty

    browser.visit("/fair_tenant")
    browser.fill_in("ft-rate-tenant", with: "acme")
    browser.fill_in("ft-rate-windows", with: "0/1")
    browser.click_button("Set rate")
    expect(browser).to have_css("#fair-tenant-error", text: "window 1: limit must be an Integer >= 1")
    expect(Sidekiq::FairTenant.rates.list).to be_empty
  end

  it "shows an error for bad input and changes nothing" do
    browser.visit("/fair_tenant")
    browser.fill_in("ft-tenant", with: "acme")
    browser.fill_in("ft-limit", with: "lots")
    browser.click_button("Set limit")
    expect(browser).to have_css("#fair-tenant-error", text: "limit must be an Integer from 0 to 1000000")

    # A fresh page for the second form: Chromium may still be swapping the POST's answer in, and a field
    # found in the document it replaces is gone ("Node ... does not belong to the document").
    browser.visit("/fair_tenant")
    browser.fill_in("ft-tenant", with: "acme")
    browser.fill_in("ft-key", with: "k")
    browser.fill_in("ft-limit", with: "3")
    browser.click_button("Set limit")
    expect(browser).to have_css("#fair-tenant-error", text: "give tenant:")
    expect(redis.keys("sidekiq-fair_tenant:limits*")).to be_empty
  end

  describe "fair queues" do
    before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] } }
    after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

    it "shows each fair queue's backlog per tenant, and the stock Queues page counts it" do
      3.times do |i|
        Sidekiq::Client.push("class" => "FairJob", "queue" => "fair", "args" => [i], "fair_tenant" => "acme")
      end
      Sidekiq::Client.push("class" => "FairJob", "queue" => "fair", "args" => [9], "fair_tenant" => "small")
      Sidekiq::FairTenant.weights.set(0, tenant: "small")

      browser.visit("/fair_tenant")
      table = browser.find("#fair-tenant-fair-fair")
      expect(browser).to have_text("fair: 4 waiting, 0 in flight, 2 tenant(s) waiting")
      expect(table).to have_css("tr", text: %r{acme\s+3\s+\d+\.\ds\s+1\.0\s+0 / -})
      expect(table).to have_css("tr", text: /small\s+1\s+.*0 \(paused\)/)

      browser.visit("/queues")
      expect(browser).to have_css("tr", text: /fair\s+4/)
    end

    it "lists each fair queue's capped tenants: running / limit, static or elastic, in force or lifted" do
      fetch, = CappedFair.build

      browser.visit("/fair_tenant")
      expect(browser).to have_text("fair: 5 waiting, 3 in flight, 4 tenant(s) waiting, 3 capped")
      table = browser.find("#fair-tenant-capped-fair")
      rows = table.all("tbody tr").map { |tr| tr.all("td").map(&:text) }
      expect(rows).to eq([["static", "tenant static, queue fair", "1 / 1", "static", "in force", "1"],
                          ["keyed", "key account-keyed", "1 / 1", "static", "in force", "1"],
                          ["elastic", "tenant elastic, queue fair", "1 / 1", "elastic", "in force", "2"]])

      fetch.retrieve_work # the last tenant under its limit: the elastic cap is lifted
      fetch.retrieve_work # and elastic runs past it on a spare thread
      browser.visit("/fair_tenant")
      lifted = %r{\Aelastic\s+tenant elastic, queue fair\s+2 / 1\s+elastic\s+lifted \(spare threads\)\s+1\z}
      expect(browser.find("#fair-tenant-capped-fair")).to have_css("tr", text: lifted)
    end

    it "shows a queue fair by worker time with its mean run times, and none for a queue by job count" do
      RatedFair.build(jobs: 4)
      browser.visit("/fair_tenant")
      expect(browser.find("#fair-tenant-fair-fair")).to have_css("th", text: "Running / limit")
      expect(browser).to have_no_css("th", text: "Mean run time")

      redis.flushdb
      Sidekiq::FairTenant.configure { |c| c.fair_queues = [{ "fair" => :time }] }
      RatedFair.build(jobs: 4) # fetched and acknowledged here: the later fetches carry the earlier run times
      browser.visit("/fair_tenant")
      expect(browser).to have_text(/fair by worker time \(mean run time \d+(\.\d)? ms\)/)
      table = browser.find("#fair-tenant-fair-fair")
      expect(table).to have_css("th", text: "Mean run time")
      expect(table.all("tbody tr").map { |tr| tr.all("td").last.text }).to all(match(/\A\d+(\.\d)? ms\z/))
    end

    it "lists each fair queue's rate-capped tenants: windows with their starts, next start, waiting" do
      RatedFair.build

      browser.visit("/fair_tenant")
      expect(browser).to have_css("#fair-tenant-startable-fair", text: "1 waiting for a rate window")
      rows = browser.find("#fair-tenant-rated-fair").all("tbody tr").map { |tr| tr.all("td").map(&:text) }
      expect(rows.size).to eq(1)
      expect(rows.first.values_at(0, 1, 2, 4)).to eq(["L", "tenant L, queue fair", "2 / 2 per 3s", "1"])
      expect(rows.first[3]).to match(/\A[0-3](\.\d+)?s\z/)
    end

    it "says why a job still waits, asked by jid through the form" do
      _fetch, units = CappedFair.build
      holder = JSON.parse(units.first.job)["jid"]
      jid = ShownStaticCapJob.perform_async("<i>static</i>", 0)
      ShownStaticCapJob.perform_async("<i>static</i>", 1)
      waiting = ShownStaticCapJob.perform_async("static", 2)

      browser.visit("/fair_tenant")
      browser.fill_in("ft-why-jid", with: waiting)
      browser.click_button("Why?")
      lines = browser.find("#fair-tenant-why").all("li").map(&:text)
      expect(lines[0..2]).to eq(["#{waiting} waits in fair queue fair, tenant static",
                                 "1 of static's 2 waiting job(s) are ahead of it",
                                 "static is out of the rotation until its next job's concurrency scope has room"])
      expect(lines[3]).to start_with("held by tenant static queue fair: running 1/1; holders: #{holder}")

      browser.visit("/fair_tenant/why?jid=#{jid}")
      expect(browser.find("#fair-tenant-why")).to have_text("tenant <i>static</i>")
      expect(browser.find("#fair-tenant-why")).to have_no_css("i")
    end

    it "links each job row of Sidekiq's queue page to why the job still waits, and leaves other pages alone" do
      CappedFair.build
      waiting = ShownStaticCapJob.perform_async("static", 2)
      odd = JSON.generate("class" => "NotLoadedHereJob", "queue" => "fair", "args" => [1], "jid" => "odd jid/&?=+%",
                          "enqueued_at" => Time.now.to_f)
      Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.push(conn, "fair", [["ghost", odd]]) }

      browser.visit("/queues/fair")
      link = browser.find("tr[title='#{waiting}'] a.fair-tenant-why")
      expect(link.text).to eq("why?")
      rows = browser.all("tr[title]")
      expect(rows.size).to eq(7)
      expect(rows.map { |tr| URI(tr.find("a.fair-tenant-why")[:href]).request_uri })
        .to eq(rows.map { |tr| "/fair_tenant/why?jid=#{CGI.escape(tr[:title]).gsub("+", "%20")}" })

      link.click
      expect(browser.find("#fair-tenant-why")).to have_text("#{waiting} waits in fair queue fair, tenant static")
      browser.visit("/queues/fair")
      browser.find("tr[title='odd jid/&?=+%'] a.fair-tenant-why").click
      expect(browser.find("#fair-tenant-why")).to have_text("odd jid/&?=+% waits in fair queue fair, tenant ghost")

      script = Net::HTTP.get_response(URI("#{@server.url}/fair_tenant/why_links.js"))
      expect([script.code, script["content-type"]]).to eq(["200", "text/javascript; charset=utf-8"])
      queue = Net::HTTP.get_response(URI("#{@server.url}/queues/fair"))
      nonce = queue["content-security-policy"][/'nonce-([^']+)'/, 1] # 7.3+; 6.4's CSP allows any same-origin script
      expect(nonce.nil?).to eq(Gem::Version.new(Sidekiq::VERSION) < Gem::Version.new("7.3"))
      src = "/fair_tenant/why_links.js?v=#{Sidekiq::FairTenant::VERSION}"
      expect(queue.body.scan("why_links.js").size).to eq(1)
      expect(queue.body).to include(%(src="#{src}"#{%( nonce="#{nonce}") if nonce}></script>\n</body>))
      %w[/queues /fair_tenant /retries].each do |page|
        expect(Net::HTTP.get(URI("#{@server.url}#{page}"))).not_to include("why_links")
      end
    end

    it "escapes tenant names in the capped tenants table" do
      2.times { |i| ShownStaticCapJob.perform_async("<b>bold</b>", i) }
      Sidekiq::FairTenant::FairFetch.new(queues: %w[fair]).retrieve_work

      browser.visit("/fair_tenant")
      cell = browser.find("#fair-tenant-capped-fair tbody tr td", match: :first)
      expect(cell.text).to eq("<b>bold</b>")
      expect(cell).to have_no_css("b")
    end

    it "sets a weight through the form and deletes it" do
      browser.visit("/fair_tenant")
      browser.fill_in("ft-weight-tenant", with: "acme")
      browser.fill_in("ft-weight", with: "2.5")
      browser.click_button("Set weight")

      expect(browser).to have_css("#fair-tenant-notice", text: "Weight set")
      expect(Sidekiq::FairTenant.weights.get(tenant: "acme")).to eq(2.5)
      browser.find("#fair-tenant-weights").click_button("Delete")
      expect(browser).to have_css("#fair-tenant-notice", text: "Weight deleted")
      expect(Sidekiq::FairTenant.weights.list).to be_empty

      browser.fill_in("ft-weight-tenant", with: "acme")
      browser.fill_in("ft-weight", with: "-3")
      browser.click_button("Set weight")
      expect(browser).to have_css("#fair-tenant-error", text: "weight must be a number from 0")
    end
  end

  it "opens no Redis connection per request: settings are read once, through no throwaway pool" do
    seed
    connections = -> { redis.info("stats")["total_connections_received"].to_i }
    3.times { browser.visit("/fair_tenant?class=ThrottledJob") } # the pools hold what a page uses
    before = connections.call
    5.times { browser.visit("/fair_tenant?class=ThrottledJob") }
    expect(browser).to have_css("#fair-tenant-tenants")
    expect(connections.call - before).to eq(0)
  end

  it "rejects a POST without Sidekiq's CSRF token" do
    response = Net::HTTP.post_form(URI("#{@server.url}/fair_tenant/limits"), "tenant" => "acme", "limit" => "1")
    expect(response.code).to eq("403")
    expect(redis.keys("sidekiq-fair_tenant:limits*")).to be_empty
  end
end

# frozen_string_literal: true

require "spec_helper"
require_relative "../support/web_server"
require_relative "../support/browser"
require_relative "../support/fair_app"

# Sidekiq's Web queue page (/queues/<name>) on a fair queue, through a real browser and WEBrick: the fair
# backlog is listed after Sidekiq's own list, paged, and a job's Delete deletes it from its tenant's list.
RSpec.describe "Sidekiq Web queue page of a fair queue" do
  before(:all) do
    skip "Debian's chromium and chromium-driver are not installed (bin/setup installs them)" unless Browser.available?
    @server = WebServer.new.start
    @browser = Browser.session(@server.url)
  end

  after(:all) do
    @browser&.driver&.quit
    @server&.stop
  end

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] } }
  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  let(:browser) { @browser }
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }

  def backlog = redis.hget("#{base}state", "n").to_i

  # Rows of the queue's table (Sidekiq 8.1's table has no class).
  def listed = browser.all("table tr[title]").map { |tr| tr[:title] }

  # Clicks a Delete button. Sidekiq's application.js turns its data-confirm into a confirm dialog; Debian's
  # Sidekiq packages (6.4.1, 8.1.7) leave that file out, so their buttons post at once (the 7.3.10 gem has it).
  def delete_in(row)
    return row.click_button("Delete") unless File.exist?(File.join(Sidekiq::Web::ASSETS, "javascripts/application.js"))

    browser.accept_confirm { row.click_button("Delete") }
  end

  # Sidekiq's list: raw-2 (newest), raw-1; the fair backlog: acme's 20 jobs (the oldest), then beta's 10.
  def seed
    %w[raw-1 raw-2].each do |jid|
      redis.lpush("queue:fair", JSON.generate("class" => "FairJob", "queue" => "fair", "args" => ["raw", 0, 0],
                                              "jid" => jid, "enqueued_at" => Time.now.to_f))
    end
    [["acme", 20], ["beta", 10]].to_h do |tenant, count|
      [tenant, Array.new(count) { |i| FairJob.perform_async(tenant, i, 0) }]
    end
  end

  it "lists Sidekiq's list, then the fair backlog tenant by tenant, 25 a page, in either direction" do
    jids = seed

    browser.visit("/queues/fair")
    expect(browser).to have_css(".badge", text: "32")
    expect(listed).to eq(["raw-2", "raw-1", *jids["acme"], *jids["beta"].first(3)])
    browser.visit("/queues/fair?page=2")
    expect(listed).to eq(jids["beta"].drop(3))
    expect(browser).to have_css("tr[title='#{jids["beta"].last}']", text: /FairJob\s+"beta", 9, 0/)

    browser.visit("/queues/fair?direction=asc")
    expect(listed).to eq([*jids["acme"], *jids["beta"].first(5)])
    browser.visit("/queues/fair?direction=asc&page=2")
    expect(listed).to eq([*jids["beta"].drop(5), "raw-1", "raw-2"])
  end

  it "deletes a fair job with its row's Delete button (the job's tenant read from its payload, or searched for)" do
    jids = seed
    ghost = JSON.generate("class" => "NotLoadedHereJob", "queue" => "fair", "args" => [1], "jid" => "ghost-1",
                          "enqueued_at" => Time.now.to_f)
    Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.push(conn, "fair", [["ghost", ghost]]) }
    gone = jids["acme"][5]

    browser.visit("/queues/fair")
    delete_in(browser.find("tr[title='#{gone}']"))
    expect(browser).to have_css(".badge", text: "32")
    expect(listed).not_to include(gone)
    expect(Sidekiq::Queue.new("fair").find_job(gone)).to be_nil
    expect(backlog).to eq(30)

    browser.visit("/queues/fair?page=2")
    delete_in(browser.find("tr[title='ghost-1']"))
    expect(browser).to have_css(".badge", text: "31")
    expect(redis.zscore("#{base}heads", "ghost")).to be_nil
    expect(Sidekiq::Queue.new("fair").map(&:jid)).to eq(["raw-2", "raw-1", *(jids["acme"] - [gone]), *jids["beta"]])
  end

  it "clears the fair backlog with the Queues page's Delete" do
    seed

    browser.visit("/queues")
    delete_in(browser.find("tr", text: /\Afair\b/))
    expect(browser).to have_no_css("tr", text: /\Afair\b/)
    expect([backlog, redis.llen("queue:fair"), Sidekiq::Queue.new("fair").count]).to eq([0, 0, 0])
  end

  it "shows on the Fair Tenant tab how many waiting jobs are startable, paused or held" do
    Sidekiq::FairTenant.weights.set(0, tenant: "beta")
    3.times { |i| FairJob.perform_async("beta", i, 0) }
    2.times { |i| FairJob.perform_async("acme", i, 0) }

    browser.visit("/fair_tenant")
    expect(browser).to have_css("#fair-tenant-startable-fair",
                                text: "Waiting jobs: 2 startable, 3 paused, 0 held by a static cap, " \
                                      "0 waiting for a rate window")
  end
end

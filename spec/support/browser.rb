# frozen_string_literal: true

require "capybara"
require "selenium-webdriver"

# Headless Debian Chromium driven through chromedriver (no network: background services off).
module Browser
  CHROMIUM = "/usr/bin/chromium"
  DRIVER = "/usr/bin/chromedriver"
  ARGS = %w[--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --disable-background-networking
            --disable-component-update --disable-sync --no-first-run --window-size=1400,1100].freeze

  module_function

  def available?
    File.executable?(CHROMIUM) && File.executable?(DRIVER)
  end

  def session(app_host)
    Capybara.register_driver(:fair_tenant_chromium) do |app|
      options = Selenium::WebDriver::Chrome::Options.new
      options.binary = CHROMIUM
      ARGS.each { |arg| options.add_argument(arg) }
      service = Selenium::WebDriver::Service.chrome(path: DRIVER)
      Capybara::Selenium::Driver.new(app, browser: :chrome, options: options, service: service)
    end
    Capybara.run_server = false
    Capybara.app_host = app_host
    Capybara.default_max_wait_time = 5
    Capybara::Session.new(:fair_tenant_chromium)
  end
end

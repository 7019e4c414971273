# frozen_string_literal: true

require "rack"
require "rack/session/cookie"
# rack 3 moved its server handlers to the rackup gem.
require Rack.release.to_i >= 3 ? "rackup/handler/webrick" : "rack/handler/webrick"
require "securerandom"
require "webrick"
require "sidekiq/web"
require "sidekiq/fair_tenant/web"

# Sidekiq::Web (with the Fair Tenant tab) served by WEBrick on a free loopback port, in a
# thread of the spec process.
class WebServer
  attr_reader :port

  def initialize
    @port = RedisServer.free_port
  end

  def url
    "http://127.0.0.1:#{port}"
  end

  # Sidekiq::Web logs refused requests to rack.logger.
  class QuietLogger
    def initialize(app)
      @app = app
      @logger = Logger.new(File::NULL)
    end

    def call(env)
      @app.call(env.merge("rack.logger" => @logger))
    end
  end

  def app
    secret = SecureRandom.hex(64)
    Rack::Builder.new do
      use QuietLogger
      use Rack::Session::Cookie, secret: secret, same_site: true, max_age: 86_400
      run Sidekiq::Web
    end
  end

  def start
    @server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: port, Logger: WEBrick::Log.new(File::NULL),
                                      AccessLog: [])
    @server.mount("/", Rack.release.to_i >= 3 ? Rackup::Handler::WEBrick : Rack::Handler::WEBrick, app)
    @thread = Thread.new { @server.start }
    self
  end

  def stop
    @server&.shutdown
    @thread&.join(5)
  end
end

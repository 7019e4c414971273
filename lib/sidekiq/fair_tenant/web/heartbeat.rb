# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Web
      # Rack middleware in Sidekiq::Web's stack: Sidekiq 7.2.3 to 8.0.1 answer `HEAD /`, its cheapest health check,
      # with the length of `queue:default`, which is 0 when `default` is fair and holds jobs. This adds `default`'s
      # fair backlog to that figure, so it is `Sidekiq::Queue.new("default").size`. Earlier and later versions
      # answer `HEAD /` with an empty body, which passes through untouched, as does every other response.
      class Heartbeat
        SIZE = /\A\d+\z/

        def initialize(app)
          @app = app
        end

        def call(env)
          response = @app.call(env)
          sized(env, response) || response
        end

        private

        def sized(env, response)
          status, headers, body = response
          return unless status == 200 && heartbeat?(env) && body.is_a?(Array)

          listed = body.join
          return unless SIZE.match?(listed)

          size = (Integer(listed, 10) + backlog(env)).to_s
          [status, WhyLinks.with_length(headers, size.bytesize), [size]]
        end

        # Through the Web UI's own Redis pool where Sidekiq 8 hands one (`env[:redis_pool]`), as its route reads.
        def backlog(env)
          read = ->(conn) { FairQueues.backlog(conn, "default") }
          env[:redis_pool] ? env[:redis_pool].with(&read) : Sidekiq.redis(&read)
        end

        def heartbeat?(env)
          env["REQUEST_METHOD"] == "HEAD" && ["/", ""].include?(env["PATH_INFO"].to_s)
        end
      end
    end
  end
end

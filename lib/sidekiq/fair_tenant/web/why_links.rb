# frozen_string_literal: true

require "cgi"

module Sidekiq
  module FairTenant
    module Web
      # Rack middleware in Sidekiq::Web's stack: on Sidekiq's queue page (GET /queues/<name>), one
      # `<script src>` tag before `</body>` loads why_links.js, which links each job row to
      # `fair_tenant/why?jid=<jid>`. Sidekiq's view has no per-row hook and its CSP blocks inline scripts
      # (a same-origin file with the request's nonce passes). Every other response, and any response
      # this cannot rewrite, passes through untouched.
      class WhyLinks
        PATH = "/fair_tenant/why_links.js"
        SOURCE = File.read(File.expand_path("why_links.js", __dir__)).freeze
        QUEUE_PAGE = %r{\A/queues/[^/]+\z}

        # The route's reply (a script: Sidekiq would send a String as text/html).
        def self.asset
          [200, { "content-type" => "text/javascript; charset=utf-8", "cache-control" => "private, max-age=86400" },
           [SOURCE]]
        end

        # A rewritten response's headers: its Content-Length, if it has one, set to `bytes` (Heartbeat's too).
        def self.with_length(headers, bytes)
          length = headers.keys.find { |key| key.to_s.casecmp?("content-length") }
          length ? headers.merge(length => bytes.to_s) : headers
        end

        def initialize(app)
          @app = app
        end

        def call(env)
          response = @app.call(env)
          linked(env, response) || response
        end

        private

        def linked(env, response)
          status, headers, body = response
          return unless status == 200 && queue_page?(env) && body.is_a?(Array) && html?(headers)

          html = body.join
          at = html.rindex("</body>") or return
          html.insert(at, tag(env))
          [status, WhyLinks.with_length(headers, html.bytesize), [html]]
        rescue StandardError
          nil
        end

        def queue_page?(env)
          env["REQUEST_METHOD"] == "GET" && QUEUE_PAGE.match?(env["PATH_INFO"].to_s)
        end

        def html?(headers)
          headers.any? { |key, value| key.to_s.casecmp?("content-type") && value.to_s.start_with?("text/html") }
        end

        def tag(env)
          src = CGI.escapeHTML("#{env["SCRIPT_NAME"]}#{PATH}?v=#{VERSION}")
          nonce = env[:csp_nonce] && %( nonce="#{CGI.escapeHTML(env[:csp_nonce])}")
          %(<script type="text/javascript" src="#{src}"#{nonce}></script>\n)
        end
      end
    end
  end
end

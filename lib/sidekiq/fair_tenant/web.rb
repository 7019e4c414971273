# frozen_string_literal: true

require "sidekiq/web"
require "sidekiq/fair_tenant"
require_relative "loader"
require_relative "cli" # the sentences of `why` (CLI::WhyText): the tab shows them as the CLI prints them

module Sidekiq
  module FairTenant
    # The "Fair Tenant" tab of Sidekiq's Web UI: `require "sidekiq/fair_tenant/web"` after
    # `require "sidekiq/web"`. Shows each job class's tenants (counts against thresholds, next
    # queue, last re-route), fair queues (backlog, in flight, per tenant: waiting jobs, oldest wait,
    # weight, running/limit; capped tenants: running/limit, static or elastic, in force or lifted),
    # concurrency scopes, runtime limits and weights, with forms (CSRF protected by Sidekiq::Web) to set
    # and delete limits and weights, and one that asks why a job (by jid) still waits (FairTenant.why), which
    # each job row of Sidekiq's queue page links to (WhyLinks). Sidekiq 7.2.3-8.0.1's `HEAD /` counts a fair
    # `default`'s backlog (Heartbeat).
    module Web
      Loader.register(self)

      VIEW = File.expand_path("web/views/fair_tenant.erb", __dir__)
      PAGE_SIZE = 25

      # Helpers for the view, evaluated in Sidekiq's action.
      module Helpers
        def ft_param(name)
          value = respond_to?(:url_params) ? url_params(name.to_s) : params[name.to_s]
          value.is_a?(String) && !value.strip.empty? ? value.strip : nil
        end

        def ft_text(value)
          h(value.to_s.dup.force_encoding(Encoding::UTF_8).scrub)
        end

        def ft_time(time)
          return "-" unless time

          ago = (Time.now - time).round
          "#{time.utc.strftime("%Y-%m-%d %H:%M:%S")} UTC (#{ago}s ago)"
        end

        # A concurrency scope: {tenant:, queue:} or {key:}.
        def ft_scope(scope)
          return "-" unless scope
          return "key #{ft_text(scope[:key])}" if scope.key?(:key)

          "tenant #{ft_text(scope[:tenant])}, queue #{ft_text(scope[:queue])}"
        end

        def ft_render(error: nil, notice: nil, why: nil)
          @ft_why = why && CLI::WhyText.lines(FairTenant.why(why))
          @ft_error = error
          @ft_notice = notice || ft_param(:notice)
          @ft_classes = JobClasses.routed
          @ft_class = @ft_classes.find { |k| k.name == ft_param(:class) } || @ft_classes.first
          @ft_offset = [ft_param(:offset).to_i, 0].max
          @ft_page = @ft_class && FairTenant.stats.tenants(@ft_class, order: :greedy, offset: @ft_offset,
                                                                      limit: PAGE_SIZE)
          @ft_scopes = FairTenant.stats.concurrency(max: 100)
          @ft_limits = FairTenant.limits.list
          ft_fair_queues
          erb(File.read(VIEW))
        end

        def ft_fair_queues
          @ft_fair = FairTenant.fair_stats.queues.map do |q|
            FairTenant.fair_stats.queue(q[:queue], limit: PAGE_SIZE, capped_limit: PAGE_SIZE, rated_limit: PAGE_SIZE)
          end
          @ft_weights = FairTenant.weights.list
          @ft_rates = FairTenant.rates.list
        end

        def ft_limit_target
          { tenant: ft_param(:tenant), queue: ft_param(:queue), key: ft_param(:key) }
        end

        def ft_back(notice)
          redirect("#{root_path}fair_tenant?notice=#{CGI.escape(notice)}")
        end

        # A form's change: back to the tab with the block's notice, or the tab again with the error.
        def ft_change
          ft_back(yield)
        rescue ArgumentError, Error => e
          ft_render(error: e.message)
        end
      end

      def self.registered(app)
        app.helpers(Helpers) if app.respond_to?(:helpers)
        register_weights(app)
        register_rates(app)

        app.get("/fair_tenant") { ft_render }
        app.get("/fair_tenant/why") { ft_render(why: ft_param(:jid)) }
        app.get(WhyLinks::PATH) { WhyLinks.asset }

        app.post("/fair_tenant/limits") do
          ft_change do
            handed = FairTenant.limits.set(ft_param(:limit), **ft_limit_target)
            "Limit set (#{handed} parked job(s) released)"
          end
        end

        app.post("/fair_tenant/limits/delete") do
          ft_change do
            FairTenant.limits.delete(**ft_limit_target)
            "Limit deleted"
          end
        end
      end

      def self.register_weights(app)
        app.post("/fair_tenant/weights") do
          ft_change do
            resumed = FairTenant.weights.set(ft_param(:weight), tenant: ft_param(:tenant), queue: ft_param(:queue))
            "Weight set#{" (resumed in #{resumed} fair queue(s))" if resumed.positive?}"
          end
        end

        app.post("/fair_tenant/weights/delete") do
          ft_change do
            FairTenant.weights.delete(tenant: ft_param(:tenant), queue: ft_param(:queue))
            "Weight deleted"
          end
        end
      end

      def self.register_rates(app)
        app.post("/fair_tenant/rates") do
          ft_change do
            back = FairTenant.rates.set(ft_param(:windows), **ft_limit_target)
            "Rate set#{" (#{back} waiting tenant(s) checked again at once)" if back.positive?}"
          end
        end

        app.post("/fair_tenant/rates/delete") do
          ft_change do
            FairTenant.rates.delete(**ft_limit_target)
            "Rate deleted"
          end
        end
      end

      # Sidekiq 8 registers extensions on its Web config, 7.3 through `Web.register` with a name
      # and tab, 6.4-7.2 with `Web.register` plus a `tabs` entry. `Web.use` (6.4 to 8.x) adds WhyLinks and
      # Heartbeat to the stack Sidekiq::Web builds on its first request.
      def self.install
        ::Sidekiq::Web.use(WhyLinks)
        ::Sidekiq::Web.use(Heartbeat)
        names = { name: "fair_tenant", tab: "Fair Tenant", index: "fair_tenant" }
        if defined?(::Sidekiq::Web::Config) && ::Sidekiq::Web::Config.method_defined?(:register)
          ::Sidekiq::Web.configure { |config| config.register(self, **names) }
        elsif ::Sidekiq::Web.method(:register).arity == 1
          ::Sidekiq::Web.register(self)
          ::Sidekiq::Web.tabs["Fair Tenant"] = "fair_tenant"
        else
          ::Sidekiq::Web.register(self, **names)
        end
      end
    end
  end
end

Sidekiq::FairTenant::Loader.eager_load(Sidekiq::FairTenant::Web)
Sidekiq::FairTenant::Web.install

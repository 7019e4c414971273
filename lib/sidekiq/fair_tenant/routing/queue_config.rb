# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Routing
      # The Sidekiq `:queues:` block implied by the job classes' rules, and the boot-time check of
      # the queues a server process actually works on (decisions in the extension's queues.rs).
      #
      #   Sidekiq::FairTenant::Routing::QueueConfig.yaml
      #   # => "...:queues:\n  - [default, 4]\n  - [throttled_2x, 2]\n..."
      module QueueConfig
        module_function

        # queue => weight: a class's own queue weighs 2^n for n rules, rule i 2^(n-1-i) (the last,
        # harshest rule 1). Queues shared by several classes keep their largest weight.
        def weights(classes = JobClasses.routed)
          Native::QueuePlan.weights(plan(classes)).to_h
        end

        def yaml(classes = JobClasses.routed)
          Native::QueuePlan.yaml(plan(classes))
        end

        # Problems with the queues this process works on (queue => weight): rule targets it does
        # not process while it processes the source (re-routed jobs would be stranded), and
        # throttled queues that outweigh their source.
        def problems(process_weights, classes = JobClasses.routed)
          Native::QueuePlan.problems(process_weights, plan(classes))
        end

        def warn_at_boot(config)
          problems(process_weights(config)).each { |message| FairTenant.logger.warn(Printable.log(message)) }
        rescue StandardError => e
          FairTenant.logger.warn(Printable.log("queue check failed: #{e.class}: #{e.message}"))
        end

        # FairQueues::Weights of the queues a Sidekiq server process works on (6.x options, 7.x/8.x capsules).
        def process_weights(config)
          if config.respond_to?(:capsules)
            config.capsules.values.each_with_object({}) do |capsule, out|
              capsule_weights(capsule).each { |queue, weight| out[queue] = [out[queue] || 0, weight].max }
            end
          else
            options = config.respond_to?(:options) ? config.options : config
            Array(options[:queues]).map(&:to_s).tally
          end
        end

        def capsule_weights(capsule)
          return capsule.weights.to_h { |q, w| [q.to_s, [w.to_i, 1].max] } if capsule.respond_to?(:weights)

          Array(capsule.queues).map(&:to_s).tally
        end

        # A class on a fair queue re-routes only by its rules with `from_fair_queue: true`.
        def plan(classes)
          classes.map do |k|
            queue = JobClasses.default_queue(k)
            [k.name, queue, JobClasses.rules(k).queues_from(FairQueues.fair?(queue))]
          end
        end
      end
    end
  end
end

# frozen_string_literal: true

require "json"
require "optparse"
require "sidekiq/fair_tenant"
require_relative "loader"

module Sidekiq
  module FairTenant
    # The `sidekiq-fair_tenant` command. Exit status: 0 done, 1 Redis trouble, 2 bad usage.
    class CLI
      Loader.register(self)

      include Limits
      include Rates
      include Weights

      UsageError = Class.new(StandardError)

      # Standard output is the command's alone: whatever else writes to $stdout meanwhile (Sidekiq's logger,
      # made on first use, and code loaded with -r) writes to standard error. Sidekiq's informational lines
      # (Sidekiq 8 logs every pool it connects) are left out: warnings and errors only.
      def self.start(argv, out: $stdout, err: $stderr)
        stdout = $stdout
        $stdout = err
        level = Sidekiq.logger.level
        Sidekiq.logger.level = [level, ::Logger::WARN].max
        new(out, err).run(argv.dup)
      ensure
        $stdout = stdout
        Sidekiq.logger.level = level if level
      end

      def initialize(out, err)
        @out = out
        @err = err
        @options = { limit: 50, offset: 0 }
      end

      def run(argv)
        parse(argv)
        command = argv.shift or raise UsageError, "no command given"
        dispatch(command, argv)
        0
      rescue UsageError, OptionParser::ParseError, ArgumentError => e
        @err.puts("sidekiq-fair_tenant: #{Printable.call(e.message)}")
        @err.puts("Run `sidekiq-fair_tenant --help` for usage.")
        2
      rescue Sidekiq::FairTenant::Error => e
        @err.puts("sidekiq-fair_tenant: #{e.class.name.split("::").last}: #{Printable.call(e.message)}")
        1
      end

      private

      def parser
        OptionParser.new do |o|
          o.banner = Format::USAGE
          o.on("--redis-url URL") { |v| use_redis(v) }
          o.on("-r", "--require FILE") { |v| require File.expand_path(v) }
          o.on("-h", "--help") do
            @out.puts(Format::USAGE)
            throw :help
          end
          command_options(o)
        end
      end

      def command_options(opts)
        %i[tenant queue key].each { |name| opts.on("--#{name} VALUE") { |v| @options[name] = v } }
        %i[top limit offset].each { |name| opts.on("--#{name} N", Integer) { |v| @options[name] = v } }
        opts.on("--concurrency") { @options[:concurrency] = true }
        opts.on("--fair") { @options[:fair] = true }
        opts.on("--json") { @options[:json] = true }
      end

      def parse(argv)
        catch(:help) do
          parser.permute!(argv)
          return
        end
        argv.replace(["help"])
      end

      COMMANDS = { "stats" => :stats, "limits" => :limits, "weights" => :weights, "fair-off" => :fair_off,
                   "why" => :why, "rates" => :rates }.freeze

      def dispatch(command, argv)
        case command
        when "help" then nil
        when "queues" then @out.puts(Routing::QueueConfig.yaml.lines(chomp: true).map { |line| Printable.call(line) })
        when *COMMANDS.keys then send(COMMANDS[command], argv)
        else raise UsageError, "unknown command #{command.inspect}"
        end
      end

      def stats(argv)
        return concurrency if @options[:concurrency]
        return fair_queue_stats(argv) if @options[:fair]

        class_stats(argv)
      end

      def class_stats(argv)
        klass = argv.shift or raise UsageError, "stats needs a JOB_CLASS (load it with -r)"
        extra!(argv)
        stats = FairTenant.stats
        return print_tenants(1, [stats.tenant(klass, @options[:tenant])]) if @options[:tenant]

        top = @options[:top]
        page = stats.tenants(klass, limit: top || @options[:limit], offset: top ? 0 : @options[:offset],
                                    order: top ? :greedy : :recent)
        print_tenants(page.total, page.tenants)
      end

      def print_tenants(total, rows)
        return @out.puts(Printable.json(total: total, tenants: rows)) if @options[:json]

        @out.puts(Format.tenants(total, Printable.deep(rows)))
      end

      def concurrency
        scopes = FairTenant.stats.concurrency
        @out.puts(@options[:json] ? Printable.json(scopes) : Format.scopes(Printable.deep(scopes)))
      end

      def target(argv)
        extra!(argv)
        @options.slice(:tenant, :queue, :key)
      end

      def extra!(argv)
        raise UsageError, "unexpected argument(s): #{argv.join(" ")}" unless argv.empty?
      end
    end
  end
end

Sidekiq::FairTenant::Loader.eager_load(Sidekiq::FairTenant::CLI)

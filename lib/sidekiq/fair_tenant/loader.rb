# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Loads lib/sidekiq/fair_tenant/ by path, in no hand-kept order: a folder is a namespace and each file defines
    # the constant its path names (`fair_queues/fetch/serving.rb`: FairQueues::Fetch::Serving). Requiring this file
    # registers `autoload` for the files at the top; a folder without a file of its own is a plain module whose
    # files are registered too, and a namespace with a file (`fair_queues.rb`) registers its folder when it opens
    # (`Loader.register(self)`). `eager_load` then loads every file at require time, so no autoload happens later
    # in a worker thread. Not autoloaded: this file, errors.rb (the one error hierarchy) and native_loader.rb
    # (which loads the extension: Native), required here; tasks.rb (rake tasks); the CLI and the Web tab, which load
    # with their own entry points (`require "sidekiq/fair_tenant/cli"`, `.../web`), not with the gem.
    module Loader
      ROOT = __dir__
      ACRONYMS = { "cli" => "CLI", "version" => "VERSION" }.freeze
      DIRECT = %w[loader errors native_loader tasks].freeze
      ON_REQUEST = %i[CLI Web].freeze

      module_function

      def constant_name(base) = ACRONYMS.fetch(base) { base.split("_").map(&:capitalize).join }

      def folder(namespace)
        names = namespace.name.split("::").drop(2)
        File.join(ROOT, *names.map { |name| ACRONYMS.key(name) || name.gsub(/(?<=[a-z0-9])(?=[A-Z])/, "_").downcase })
      end

      # Autoload on `namespace` for each file in its folder, and the same for each subfolder without a file.
      def register(namespace = FairTenant)
        dir = folder(namespace)
        Dir.children(dir).sort.each do |entry|
          path = File.join(dir, entry)
          if entry.end_with?(".rb")
            base = entry.delete_suffix(".rb")
            next if namespace == FairTenant && apart?(base)

            namespace.autoload(constant_name(base), path)
          elsif implicit?(path)
            register(implicit_module(namespace, constant_name(entry)))
          end
        end
      end

      def apart?(base) = DIRECT.include?(base) || ON_REQUEST.include?(constant_name(base).to_sym)

      def implicit_module(namespace, name)
        namespace.const_defined?(name, false) ? namespace.const_get(name, false) : namespace.const_set(name, Module.new)
      end

      def implicit?(path)
        File.basename(path).match?(/\A[a-z_]+\z/) && !File.exist?("#{path}.rb") && !Dir.glob("#{path}/**/*.rb").empty?
      end

      def namespace?(value, name) = value.is_a?(Module) && value.name == name && File.directory?(folder(value))

      # Loads every constant of `namespace` through its autoload, and those of the namespaces below it (at the top:
      # all but the CLI and the Web tab, which load with their entry points).
      def eager_load(namespace = FairTenant)
        namespace.constants(false).sort.each do |name|
          value = namespace.const_get(name, false)
          eager_load(value) if namespace?(value, "#{namespace.name}::#{name}")
        end
      end
    end
  end
end

require_relative "errors"
require_relative "native_loader"
Sidekiq::FairTenant::Loader.register

# frozen_string_literal: true

require "rbconfig"
require_relative "errors"

module Sidekiq
  module FairTenant
    # Loads the Rust extension, which defines Sidekiq::FairTenant::Native.
    module NativeLoader
      FILE = "fair_tenant_rs.#{RbConfig::CONFIG["DLEXT"]}".freeze

      module_function

      # A platform gem carries one binary per Ruby minor version in <major.minor>/ next to this file, each
      # compiled against that Ruby's headers. The one for this Ruby is tried first, by its path, and none other
      # is ever loaded: a binary built for another Ruby sees other struct layouts, and crashes instead of
      # raising. `rake compile` writes there too.
      def require_extension(dir = __dir__, ruby_version = RUBY_VERSION)
        minor = ruby_version[/\A\d+\.\d+/]
        precompiled = File.join(dir, minor, FILE)
        return require(precompiled) if File.exist?(precompiled)

        carried = Dir[File.join(dir, "*", FILE)].map { |path| File.basename(File.dirname(path)) }.grep(/\A\d+\.\d+\z/)
        raise MissingExtensionError, missing_message(minor, carried) unless carried.empty?

        # A source gem compiles the extension at install time into its extension_dir, which is on the load
        # path but not next to this file: plain `require`.
        require "sidekiq/fair_tenant/fair_tenant_rs"
      end

      def missing_message(minor, carried)
        versions = carried.sort_by { |version| version.split(".").map(&:to_i) }.join(", ")
        "sidekiq-fair_tenant-rs has no native extension for Ruby #{minor} (#{RUBY_PLATFORM}); this copy " \
          "carries Ruby #{versions} only. Use the source gem, which compiles at install (needs Rust >= 1.88 and " \
          "libclang): `gem install sidekiq-fair_tenant-rs --platform ruby`, or " \
          "`gem \"sidekiq-fair_tenant-rs\", force_ruby_platform: true` in the Gemfile; in a checkout, `rake compile`"
      end
    end
  end
end

Sidekiq::FairTenant::NativeLoader.require_extension

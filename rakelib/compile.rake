# frozen_string_literal: true

require "rubygems/package_task"
require_relative "native_gem"
require_relative "native_libraries"

# Share the workspace's target/ with plain cargo commands so rebuilds are incremental; extconf.rb keeps a
# CARGO_TARGET_DIR it was given instead of deleting it after `make install`.
ENV["CARGO_TARGET_DIR"] = File.expand_path("../target", __dir__) if ENV.fetch("CARGO_TARGET_DIR", "").empty?

require_relative "cargo_features"

# A checkout's library also carries what bin/demo and bin/bench call, and the slot API kept for specs (the cargo
# feature `bench`); the gems' do not: `gem install` builds without it, and so do `rake native gem`, `native:all`
# and `package:native_*`.
if Rake.application.top_level_tasks.any? { |task| task.start_with?("native", "package:native") }
  CargoFeatures.use("")
else
  CargoFeatures.use(ENV.fetch("RB_SYS_CARGO_FEATURES", "").empty? ? "bench" : ENV.fetch("RB_SYS_CARGO_FEATURES"))
end

gemspec = Gem::Specification.load(File.expand_path("../sidekiq-fair_tenant-rs.gemspec", __dir__))
lib_dir = "lib/sidekiq/fair_tenant/#{RUBY_VERSION[/\A\d+\.\d+/]}"

# A checkout compiled before lib_dir had a version directory keeps a siteconf that installs into
# lib/sidekiq/fair_tenant/: delete it, and rake-compiler writes it (and the Makefile) again.
Dir.chdir(File.expand_path("..", __dir__)) do
  siteconf = "tmp/#{RUBY_PLATFORM}/fair_tenant_rs/#{RUBY_VERSION}/.rake-compiler-siteconf.rb"
  File.delete(siteconf) if File.exist?(siteconf) && !File.read(siteconf).include?(File.expand_path(lib_dir))
end

# `rake compile` and `rake native gem` (the platform gem) both put the library in a directory per Ruby minor
# version, where lib/sidekiq/fair_tenant/native_loader.rb looks first.
NativeGemExtensionTask.new("fair_tenant_rs", gemspec) do |ext|
  ext.ext_dir = "ext/fair_tenant_rs"
  ext.lib_dir = lib_dir
  ext.source_pattern = "{**/*.rs,**/*.lua,Cargo.toml}"
  # The platform gem carries the compiled library, not what compiling it takes.
  ext.native_gem do |spec|
    spec.files.reject! { |path| path.start_with?("ext/") || path.match?(/\ACargo\.(toml|lock)\z/) }
    NativeLibraries.adjust(spec) # `rake native:all`: the other Rubies' libraries too
  end
end

# rake-compiler rebuilds the library (and the Makefile) when a source changes; a changed feature set is one.
dlext = RbConfig::CONFIG["DLEXT"]
Rake::Task.tasks.each do |task|
  next unless task.is_a?(Rake::FileTask) && task.name.start_with?("tmp/")

  task.enhance([CargoFeatures::STAMP]) if task.name.end_with?("/Makefile", "/fair_tenant_rs.#{dlext}")
end

# `rake gem`: the source gem, pkg/sidekiq-fair_tenant-rs-<version>.gem; with `native` first, the platform gem too.
Gem::PackageTask.new(gemspec) do |pkg|
  pkg.need_zip = false
  pkg.need_tar = false
end

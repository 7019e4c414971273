# frozen_string_literal: true

require "find"
require "fileutils"
require "rbconfig"
require_relative "native_smoke"

module PackageSmoke
  ROOT = File.expand_path("..", __dir__)
  GEMSPEC = File.join(ROOT, "sidekiq-fair_tenant-rs.gemspec")
  WORK_DIR = File.join(ROOT, "tmp", "package_smoke")
  GEM_HOME = File.join(WORK_DIR, "gemhome")
  MAX_BYTES = 20 * 1024 * 1024

  module_function

  # Runs a command outside Bundler's environment, as a user installing the gem would.
  def run(env, *cmd)
    runner = -> { system(env, *cmd, chdir: ROOT) || abort("package:smoke: command failed: #{cmd.join(" ")}") }
    defined?(Bundler) ? Bundler.with_unbundled_env(&runner) : runner.call
  end

  def build
    spec = Gem::Specification.load(GEMSPEC)
    gem_file = File.join(WORK_DIR, "#{spec.full_name}.gem")
    FileUtils.rm_rf(WORK_DIR)
    FileUtils.mkdir_p(WORK_DIR)
    run({}, "gem", "build", GEMSPEC, "--output", gem_file)
    [spec, gem_file]
  end

  # A build from source with no CARGO_TARGET_DIR: the extension's own target dir must be gone afterwards.
  # --install-dir ignores the system gems, so dependencies (sidekiq) are left to GEM_PATH at load time.
  def install(gem_file)
    env = { "CARGO_TARGET_DIR" => nil, "RB_SYS_CARGO_FEATURES" => nil, "GEM_HOME" => GEM_HOME, "GEM_PATH" => gem_path }
    run(env, "gem", "install", "--local", "--install-dir", GEM_HOME, "--no-document",
        "--ignore-dependencies", gem_file)
  end

  def check_installed(spec)
    dirs = Dir[File.join(GEM_HOME, "{gems,extensions/*/*}", spec.full_name)]
    abort "package:smoke: #{spec.full_name} not installed in #{GEM_HOME}" if dirs.empty?

    build_path(dirs)

    dirs.each do |dir|
      targets = cargo_target_dirs(dir)
      abort "package:smoke: cargo build output left in #{dir}: #{targets.join(", ")}" unless targets.empty?
    end
    gem_dir = File.join(GEM_HOME, "gems", spec.full_name)
    bytes = Find.find(gem_dir).sum { |path| File.file?(path) ? File.size(path) : 0 }
    abort "package:smoke: #{gem_dir} is #{bytes} bytes (limit #{MAX_BYTES})" if bytes >= MAX_BYTES
    puts "package:smoke: #{gem_dir} is #{(bytes / 1024.0 / 1024).round(1)} MB, no target/ directory"
  end

  # Which way extconf.rb built it (rb_sys's create_rust_makefile, or its own Makefile), from the build log.
  def build_path(dirs)
    log = dirs.flat_map { |dir| Dir[File.join(dir, "gem_make.out")] }.first
    said = log && File.read(log)[/sidekiq-fair_tenant-rs: building with .*/]
    abort "package:smoke: no build path reported in #{log.inspect}" unless said
    expected = rb_sys_installed? ? "rb_sys" : "cargo through its own Makefile"
    abort "package:smoke: #{said} (expected #{expected})" unless said.include?(expected)
    puts "package:smoke: the source gem: #{said.delete_prefix("sidekiq-fair_tenant-rs: ")}"
  end

  # Whether `gem install` sees the rb_sys gem (outside Bundler, whose bundle leaves it out).
  def rb_sys_installed?
    probe = -> { system(RbConfig.ruby, "-e", 'exit(Gem::Specification.find_all_by_name("rb_sys").empty? ? 1 : 0)') }
    defined?(Bundler) ? Bundler.with_unbundled_env(&probe) : probe.call
  end

  def cargo_target_dirs(dir)
    Dir.glob("**/target", File::FNM_DOTMATCH, base: dir).select { |path| File.directory?(File.join(dir, path)) }
  end

  def gem_path(home = GEM_HOME)
    ([home] + Gem.path).uniq.join(File::PATH_SEPARATOR)
  end

  def load_and_enqueue(home = GEM_HOME, platform = "ruby")
    env = { "GEM_HOME" => home, "GEM_PATH" => gem_path(home), "SMOKE_GEM_HOME" => home, "SMOKE_PLATFORM" => platform }
    run(env, RbConfig.ruby, File.join(__dir__, "package_smoke.rb"))
  end
end

namespace :package do
  # A pkg/ left by an older file list makes the gem tasks copy from stale directories; pkg/native/ holds the
  # libraries bin/build-native wrote.
  task :clean_pkg do
    rm_rf Dir["pkg/*"] - ["pkg/native"]
  end

  desc "Build the source gem, install it (compiling) into tmp/, check its size, require it, re-route a job and " \
       "fair-fetch one; then the same with the platform gem (rake native gem), which must install without compiling"
  task smoke: :clean_pkg do
    spec, gem_file = PackageSmoke.build
    PackageSmoke.install(gem_file)
    PackageSmoke.check_installed(spec)
    PackageSmoke.load_and_enqueue

    CargoFeatures.use("")
    %w[native gem].each { |name| Rake::Task[name].invoke }
    NativeSmoke.check_contents(NativeSmoke.gem_file)
    NativeSmoke.install_here(NativeSmoke.gem_file)
    PackageSmoke.load_and_enqueue(NativeSmoke::GEM_HOME, NativeSmoke.platform)
  end

  desc "Build the platform gem for every Ruby of #{NativeLibraries::RUBIES.join(", ")} (rake native:all gem: " \
       "the others' libraries from $#{NativeLibraries::DIR_ENV}), check each library and its glibc, install it " \
       "into tmp/ without compiling, and re-route and fair-fetch a job with this Ruby"
  task native_all: %w[clean_pkg native:all gem] do
    NativeSmoke.check_contents(NativeSmoke.gem_file, NativeLibraries::RUBIES)
    NativeSmoke.install_here(NativeSmoke.gem_file)
    PackageSmoke.load_and_enqueue(NativeSmoke::GEM_HOME, NativeSmoke.platform)
  end

  desc "Build the platform gem, install it on a brand-new Debian 12 root with Debian's Ruby and Sidekiq but " \
       "no Rust, compiler or libclang, require it, re-route and fair-fetch a job (several minutes; not in bin/test)"
  task native_smoke: %w[native gem] do
    NativeSmoke.check_contents(NativeSmoke.gem_file)
    NativeSmoke.fresh_machine(NativeSmoke.gem_file)
  end
end

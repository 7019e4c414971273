# frozen_string_literal: true

require "fileutils"
require "open3"
require "rubygems/package"
require "tmpdir"

# The platform gem (`rake native gem`): what it carries, and that it installs without compiling.
module NativeSmoke
  ROOT = File.expand_path("..", __dir__)
  GEM_HOME = File.join(ROOT, "tmp", "native_smoke", "gemhome")
  FRESH_MACHINE_CHECK = File.expand_path("../shared/fresh-machine-check", ROOT)
  LIBRARY = %r{\Alib/sidekiq/fair_tenant/(\d+\.\d+)/fair_tenant_rs\.so\z}
  # What building from source takes or leaves behind: none of it belongs in the platform gem.
  BUILD_FILES = %r{\A(ext/|Cargo\.)|(\A|/)target/|\.(so|o|a|rlib|rmeta|d|dylib|bundle|dll)\z}

  module_function

  def platform
    Gem::Platform.new(RUBY_PLATFORM).to_s
  end

  def gem_file
    spec = Gem::Specification.load(File.join(ROOT, "sidekiq-fair_tenant-rs.gemspec"))
    File.join(ROOT, "pkg", "#{spec.name}-#{spec.version}-#{platform}.gem")
  end

  def fail!(message)
    abort "package:native_smoke: #{message}"
  end

  # The source gem's Ruby files and one stripped library for this Ruby's minor version (the only one built here),
  # no extension to build, and a required_ruby_version that admits exactly that minor version.
  def check_contents(file)
    package = Gem::Package.new(file)
    minor = RUBY_VERSION[/\A\d+\.\d+/]
    library = check_library(package, minor)
    fail!("#{file} would compile at install: #{package.spec.extensions}") unless package.spec.extensions.empty?
    check_ruby_requirement(package.spec, minor)
    bytes = check_stripped(package, library)
    puts "package:native_smoke: #{File.basename(file)}: #{File.size(file)} bytes, #{library} " \
         "#{bytes} bytes (stripped), required_ruby_version #{package.spec.required_ruby_version}"
  end

  def check_library(package, minor)
    libraries = package.contents.grep(LIBRARY)
    fail!("carries #{libraries.inspect}, not one library for Ruby #{minor}") unless
      libraries.map { |path| path[LIBRARY, 1] } == [minor]
    build_files = package.contents.grep(BUILD_FILES) - libraries
    fail!("carries build files: #{build_files.join(", ")}") unless build_files.empty?
    libraries.first
  end

  def check_ruby_requirement(spec, minor)
    major, min = minor.split(".").map(&:to_i)
    admitted = ["#{minor}.0", RUBY_VERSION, "#{minor}.99"]
    refused = ["#{major}.#{min - 1}.99", "#{major}.#{min + 1}.0", "#{major + 1}.0.0"]
    requirement = spec.required_ruby_version
    wrong = admitted.reject { |v| requirement.satisfied_by?(Gem::Version.new(v)) } +
            refused.select { |v| requirement.satisfied_by?(Gem::Version.new(v)) }
    fail!("required_ruby_version #{requirement} is wrong for #{wrong.join(", ")}") unless wrong.empty?
  end

  # `file` calls a library "stripped" when it has no .symtab section; readelf (binutils) comes with gcc.
  def check_stripped(package, library)
    Dir.mktmpdir do |dir|
      package.extract_files(dir)
      path = File.join(dir, library)
      sections, status = Open3.capture2("readelf", "-S", "--wide", path)
      fail!("readelf -S #{library} failed") unless status.success?
      fail!("#{library} is not stripped (has .symtab)") if sections.include?(".symtab")
      File.size(path)
    end
  end

  # Installs into tmp/ with RubyGems alone; the output must not mention building an extension.
  def install_here(file)
    FileUtils.rm_rf(GEM_HOME)
    env = { "GEM_HOME" => GEM_HOME, "GEM_PATH" => PackageSmoke.gem_path(GEM_HOME) }
    cmd = ["gem", "install", "--local", "--install-dir", GEM_HOME, "--no-document", "--ignore-dependencies", file]
    out, status = Bundler.with_unbundled_env { Open3.capture2e(env, *cmd, chdir: ROOT) }
    puts out
    fail!("#{cmd.join(" ")} failed") unless status.success?
    fail!("the platform gem compiled at install") if out.include?("Building native extensions")
  end

  # The committed HEAD's rakelib/native_smoke.sh and package_smoke.rb, with this gem file, on a brand-new Debian 12
  # root without Rust (../shared/fresh-machine-check clones HEAD into it).
  def fresh_machine(file)
    fail!("#{FRESH_MACHINE_CHECK} not found") unless File.executable?(FRESH_MACHINE_CHECK)
    dirty = `git -C #{ROOT} status --porcelain --untracked-files=no`
    warn "package:native_smoke: uncommitted changes are not in the fresh root:\n#{dirty}" unless dirty.empty?
    env = { "FRESH_NO_RUST" => "1", "FRESH_COPY" => file }
    PackageSmoke.run(env, FRESH_MACHINE_CHECK, "--", "bash", "rakelib/native_smoke.sh",
                     "/work/extra/#{File.basename(file)}")
  end
end

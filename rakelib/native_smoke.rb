# frozen_string_literal: true

require "fileutils"
require "open3"
require "rubygems/package"
require "tmpdir"
require_relative "native_libraries"

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

  # The source gem's Ruby files and a stripped library for each Ruby minor version of `minors` (`rake native`: this
  # Ruby's alone; `rake native:all`: NativeLibraries::RUBIES), each needing no glibc newer than
  # NativeLibraries::MAX_GLIBC, no extension to build, and a required_ruby_version that admits those minor versions
  # and none older or newer.
  def check_contents(file, minors = [NativeLibraries.minor])
    package = Gem::Package.new(file)
    libraries = check_libraries(package, minors)
    fail!("#{file} would compile at install: #{package.spec.extensions}") unless package.spec.extensions.empty?
    check_ruby_requirement(package.spec, minors)
    puts "package:native_smoke: #{File.basename(file)}: #{File.size(file)} bytes, " \
         "required_ruby_version #{package.spec.required_ruby_version}"
    Dir.mktmpdir do |dir|
      package.extract_files(dir)
      libraries.each do |library|
        path = File.join(dir, library)
        check_stripped(path, library)
        puts "package:native_smoke: #{library}: #{File.size(path)} bytes (stripped)"
        NativeLibraries.check_glibc(path, "package:native_smoke: #{library}")
      end
    end
  end

  def check_libraries(package, minors)
    libraries = package.contents.grep(LIBRARY)
    fail!("carries #{libraries.inspect}, not a library for each of Ruby #{minors.join(", ")}") unless
      NativeLibraries.sort(libraries.map { |path| path[LIBRARY, 1] }) == NativeLibraries.sort(minors)
    build_files = package.contents.grep(BUILD_FILES) - libraries
    fail!("carries build files: #{build_files.join(", ")}") unless build_files.empty?
    libraries
  end

  def check_ruby_requirement(spec, minors)
    requirement = spec.required_ruby_version
    admitted, refused = ruby_versions(minors)
    wrong = admitted.reject { |v| requirement.satisfied_by?(Gem::Version.new(v)) } +
            refused.select { |v| requirement.satisfied_by?(Gem::Version.new(v)) }
    fail!("required_ruby_version #{requirement} is wrong for #{wrong.join(", ")}") unless wrong.empty?
  end

  # Versions the gem must admit (each carried minor's first and a late patch, this Ruby's when carried) and
  # refuse (just below the oldest, the next minor after the newest, the next major).
  def ruby_versions(minors)
    oldest, newest = NativeLibraries.sort(minors).values_at(0, -1).map { |minor| minor.split(".").map(&:to_i) }
    admitted = minors.flat_map { |minor| ["#{minor}.0", "#{minor}.99"] }
    admitted << RUBY_VERSION if minors.include?(NativeLibraries.minor)
    [admitted, ["#{oldest[0]}.#{oldest[1] - 1}.99", "#{newest[0]}.#{newest[1] + 1}.0", "#{newest[0] + 1}.0.0"]]
  end

  # `file` calls a library "stripped" when it has no .symtab section; readelf (binutils) comes with gcc.
  def check_stripped(path, library)
    sections, status = Open3.capture2("readelf", "-S", "--wide", path)
    fail!("readelf -S #{library} failed") unless status.success?
    fail!("#{library} is not stripped (has .symtab)") if sections.include?(".symtab")
  end

  # Installs into tmp/ with RubyGems alone; the output must not mention building an extension.
  def install_here(file)
    FileUtils.rm_rf(GEM_HOME)
    env = { "GEM_HOME" => GEM_HOME, "GEM_PATH" => PackageSmoke.gem_path(GEM_HOME) }
    cmd = ["gem", "install", "--local", "--install-dir", GEM_HOME, "--no-document", "--ignore-dependencies", file]
    install = -> { Open3.capture2e(env, *cmd, chdir: ROOT) }
    out, status = defined?(Bundler) ? Bundler.with_unbundled_env(&install) : install.call
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

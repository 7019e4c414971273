# frozen_string_literal: true

require "fileutils"
require "open3"

# The compiled libraries a platform gem carries, one per Ruby minor version, and the glibc each needs.
# `rake native gem` carries the running Ruby's alone; `rake native:all gem` one for each of RUBIES, the others
# taken from FAIR_TENANT_NATIVE_DIR/<major.minor>/, where `bin/build-native` (run on a machine with that Ruby)
# writes them.
module NativeLibraries
  ROOT = File.expand_path("..", __dir__)
  RUBIES = %w[3.1 3.3].freeze
  # Debian 12's glibc: no library may need a newer one, wherever it was built.
  MAX_GLIBC = "2.36"
  FILE = "fair_tenant_rs.so"
  DIR_ENV = "FAIR_TENANT_NATIVE_DIR"

  module_function

  def minor(version = RUBY_VERSION)
    version[/\A\d+\.\d+/]
  end

  # Where the gem (and `rake compile`) keeps the library for a Ruby minor version, relative to ROOT.
  def lib_path(minor)
    "lib/sidekiq/fair_tenant/#{minor}/#{FILE}"
  end

  def dir
    File.expand_path(ENV.fetch(DIR_ENV, "pkg/native"), ROOT)
  end

  def sort(minors)
    minors.sort_by { |version| version.split(".").map(&:to_i) }
  end

  # The highest GLIBC_x.y symbol version the library requires (objdump, from binutils, comes with gcc).
  def glibc(path)
    out, status = Open3.capture2e("objdump", "-T", path)
    raise "objdump -T #{path} failed: #{out}" unless status.success?

    out.scan(/GLIBC_(\d+(?:\.\d+)+)/).flatten.max_by { |version| Gem::Version.new(version) }
  end

  # The library's glibc figure, checked against MAX_GLIBC; aborts naming both when it is newer.
  def check_glibc(path, label = path)
    found = glibc(path)
    abort "#{label} needs GLIBC_#{found}, newer than #{MAX_GLIBC} (Debian 12): build it on an older system" if
      found && Gem::Version.new(found) > Gem::Version.new(MAX_GLIBC)
    puts "#{label}: highest required glibc symbol GLIBC_#{found || "(none)"} (limit #{MAX_GLIBC})"
    found
  end

  # `rake native:all`: the other Rubies' libraries, copied from dir() next to the running Ruby's; aborts naming
  # what is missing and how to build it.
  def gather
    others = RUBIES - [minor]
    missing = others.reject { |version| File.file?(File.join(dir, version, FILE)) }
    unless missing.empty?
      abort "native:all: no library for Ruby #{missing.join(", ")} in #{dir} (#{DIR_ENV}): run `bin/build-native` " \
            "on a machine with that Ruby and copy its pkg/native/<version>/ there (docs/PACKAGING.md)"
    end
    others.each do |version|
      check_glibc(File.join(dir, version, FILE), "native:all: Ruby #{version} library")
      FileUtils.mkdir_p(File.dirname(File.join(ROOT, lib_path(version))))
      FileUtils.cp(File.join(dir, version, FILE), File.join(ROOT, lib_path(version)))
    end
    @carried = sort(RUBIES | [minor])
  end

  # The platform gem's spec (called by compile.rake's native_gem hook): after `gather`, it carries every
  # library and admits the Rubies from the oldest to the newest (a Ruby in between that it lacks gets
  # MissingExtensionError from the loader, naming the source gem).
  def adjust(spec)
    return unless @carried

    spec.files |= (@carried - [minor]).map { |version| lib_path(version) }
    spec.required_ruby_version = [">= #{@carried.first}", "< #{@carried.last.succ}.dev"]
  end
end

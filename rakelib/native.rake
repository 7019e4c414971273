# frozen_string_literal: true

require_relative "native_libraries"

namespace :native do
  desc "Compile the extension for this Ruby and copy it to $FAIR_TENANT_NATIVE_DIR/<major.minor>/ (default " \
       "pkg/native/), checking its glibc (bin/build-native runs it)"
  task library: :compile do
    minor = NativeLibraries.minor
    source = File.join(NativeLibraries::ROOT, NativeLibraries.lib_path(minor))
    NativeLibraries.check_glibc(source, "native:library: Ruby #{minor} library")
    target = File.join(NativeLibraries.dir, minor, NativeLibraries::FILE)
    mkdir_p File.dirname(target)
    cp source, target
  end

  desc "The platform gem with a library per Ruby of #{NativeLibraries::RUBIES.join(", ")}: this Ruby's compiled " \
       "here, the others from $FAIR_TENANT_NATIVE_DIR/<major.minor>/ (bin/build-native); then `rake gem`"
  task :all do
    NativeLibraries.gather
    Rake::Task["compile"].invoke
    minor = NativeLibraries.minor
    NativeLibraries.check_glibc(File.join(NativeLibraries::ROOT, NativeLibraries.lib_path(minor)),
                                "native:all: Ruby #{minor} library")
    Rake::Task["native"].invoke
  end
end

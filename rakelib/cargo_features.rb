# frozen_string_literal: true

require "fileutils"

# The cargo features the extension is built with (RB_SYS_CARGO_FEATURES, comma-separated, read by extconf.rb's
# Makefile and by rb_sys's), and a stamp file that changes with them, so that a changed set rebuilds.
module CargoFeatures
  STAMP = File.expand_path("../tmp/cargo-features", __dir__)

  module_function

  def use(features)
    ENV["RB_SYS_CARGO_FEATURES"] = features
    return if File.exist?(STAMP) && File.read(STAMP) == features

    FileUtils.mkdir_p(File.dirname(STAMP))
    File.write(STAMP, features)
  end
end

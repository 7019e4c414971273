# frozen_string_literal: true

require "fileutils"
require "open3"
require "spec_helper"
require "tmpdir"

# lib/sidekiq/fair_tenant/native_loader.rb run in a subprocess against a fake lib tree: which extension it loads, and
# the error it raises when the tree only carries binaries for other Ruby versions (9.9 stands in for a Ruby
# this machine does not have).
RSpec.describe Sidekiq::FairTenant::NativeLoader do
  let(:lib) { File.expand_path("../../lib", __dir__) }
  let(:minor) { RUBY_VERSION[/\A\d+\.\d+/] }
  let(:compiled) { File.join(lib, "sidekiq/fair_tenant", minor, described_class::FILE) }
  let(:tmp) { Dir.mktmpdir("native_loader") }
  let(:fake_lib) { File.join(tmp, "lib") }

  after { FileUtils.rm_rf(tmp) }

  # The loader and the error classes it needs, with the given version directories. A binary that is not
  # for this Ruby is not a library at all: loading it would fail with "invalid ELF header", not our error.
  def fake_tree(versions, real: [])
    dir = File.join(fake_lib, "sidekiq/fair_tenant")
    FileUtils.mkdir_p(dir)
    FileUtils.cp(%w[native_loader.rb errors.rb].map { |file| File.join(lib, "sidekiq/fair_tenant", file) }, dir)
    versions.each do |version|
      FileUtils.mkdir_p(File.join(dir, version))
      target = File.join(dir, version, described_class::FILE)
      real.include?(version) ? FileUtils.cp(compiled, target) : File.write(target, "not a library")
    end
  end

  # Runs native_loader.rb with nothing but the given directories on the load path: no RubyGems, no Bundler, so the
  # gem's own lib/ cannot be found by accident.
  def load_native(*load_path)
    script = <<~'RUBY'
      begin
        require "sidekiq/fair_tenant/native_loader"
        puts "loaded #{$LOADED_FEATURES.grep(/fair_tenant_rs/).join(",")}"
        puts "gem_version #{Sidekiq::FairTenant::Native.build_info[:gem_version]}"
      rescue Sidekiq::FairTenant::Error => e
        puts "#{e.class} < #{e.class.superclass}: #{e.message}"
        exit 3
      end
    RUBY
    args = load_path.flat_map { |dir| ["-I", dir] }
    Open3.capture3({ "RUBYOPT" => nil, "RUBYLIB" => nil }, RbConfig.ruby, "--disable-gems", *args, "-e", script)
  end

  # A compiled extension elsewhere on the load path (another copy of the gem) is not loaded either.
  def extension_dir
    dir = File.join(tmp, "extensions")
    FileUtils.mkdir_p(File.join(dir, "sidekiq/fair_tenant"))
    FileUtils.cp(compiled, File.join(dir, "sidekiq/fair_tenant", described_class::FILE))
    dir
  end

  it "raises MissingExtensionError naming the versions it carries when none is for this Ruby" do
    fake_tree(%w[9.9 3.10 3.4])
    out, err, status = load_native(fake_lib, extension_dir)
    expect(status.exitstatus).to eq(3), "#{out}#{err}"
    expect(out).to include("Sidekiq::FairTenant::MissingExtensionError < Sidekiq::FairTenant::Error")
    expect(out).to include("no native extension for Ruby #{minor} (#{RUBY_PLATFORM})")
    expect(out).to include("carries Ruby 3.4, 3.10, 9.9 only")
    expect(out).to include("gem install sidekiq-fair_tenant-rs --platform ruby")
  end

  it "loads the binary in this Ruby's version directory, by its path" do
    fake_tree(["9.9", minor], real: [minor])
    out, err, status = load_native(fake_lib)
    expect(status).to be_success, "#{out}#{err}"
    expect(out).to include("loaded #{fake_lib}/sidekiq/fair_tenant/#{minor}/#{described_class::FILE}\n")
    expect(out).to include("gem_version #{Sidekiq::FairTenant::VERSION}")
  end

  it "falls back to the load path without version directories, as a source gem installs it" do
    fake_tree([])
    out, err, status = load_native(fake_lib, extension_dir)
    expect(status).to be_success, "#{out}#{err}"
    expect(out).to include("loaded #{tmp}/extensions/sidekiq/fair_tenant/#{described_class::FILE}\n")

    _, err, status = load_native(fake_lib)
    expect(status.exitstatus).to eq(1)
    expect(err).to include("cannot load such file -- sidekiq/fair_tenant/fair_tenant_rs (LoadError)")
  end
end

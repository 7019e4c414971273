# frozen_string_literal: true

require "spec_helper"
require "open3"
require "rbconfig"

# The Ruby layout (docs/ARCHITECTURE.md, "Ruby layout"): a folder of lib/sidekiq/fair_tenant/ is a namespace, and
# each file defines the constant its path names and loads alone.
RSpec.describe "the Ruby layout" do
  root = File.expand_path("../../lib/sidekiq/fair_tenant", __dir__)
  loader = Sidekiq::FairTenant::Loader
  files = Dir.glob("**/*.rb", base: root).sort - %w[loader.rb tasks.rb]
  expected = files.to_h { |file| [file, file.delete_suffix(".rb").split("/").map { |p| loader.constant_name(p) }] }
  expected["errors.rb"] = ["Error"] # the one file with several constants: the error hierarchy

  # "Sidekiq::FairTenant::A::B" => file, for every constant the gem defines under Sidekiq::FairTenant.
  def self.defined_in(root, mod = Sidekiq::FairTenant, found = {})
    mod.constants(false).sort.each do |name|
      file = Array(mod.const_source_location(name)).first
      next unless file.is_a?(String) && file.start_with?("#{root}/")

      found["#{mod.name}::#{name}"] = file.delete_prefix("#{root}/")
      value = mod.const_get(name, false)
      defined_in(root, value, found) if value.is_a?(Module) && value.name == "#{mod.name}::#{name}"
    end
    found
  end

  before(:all) do
    require "sidekiq/fair_tenant/cli"
    require "sidekiq/web"
    require "sidekiq/fair_tenant/web"
  end

  it "has each file define the constant its path names, and beside it nothing but in that constant" do
    defined = self.class.defined_in(root)
    wrong = files.reject { |file| file == "errors.rb" }.filter_map do |file|
      name = "Sidekiq::FairTenant::#{expected[file].join("::")}"
      parent = name.rpartition("::").first
      beside = defined.select { |const, at| at == file && const.rpartition("::").first == parent }.keys
      "#{file}: defines #{beside.inspect}, its path names #{name}" unless beside == [name]
    end
    expect(wrong).to eq([])
  end

  it "keeps the public names as the same objects as the classes in their namespaces" do
    ft = Sidekiq::FairTenant
    expect(ft::ClientMiddleware).to be(ft::Routing::ClientMiddleware)
    expect(ft::ServerMiddleware).to be(ft::Concurrency::ServerMiddleware)
    expect(ft::FairFetch).to be(ft::FairQueues::Fetch)
    expect(ft::FairFetch.name).to eq("Sidekiq::FairTenant::FairQueues::Fetch")
    expect(ft::Interrupted.name).to eq("Sidekiq::FairTenant::Interrupted") # stored in dead jobs' error_class
  end

  it "loads each file alone, by its constant, in a fresh process after Sidekiq and the loader (no hand-kept order)" do
    script = <<~'RUBY'
      require "sidekiq"
      root, *files = ARGV
      failed = files.filter_map do |file, const|
        file, const = file.split("=")
        pid = fork do
          require "sidekiq/fair_tenant/loader"
          entry = %w[cli web].find { |name| file == "#{name}.rb" || file.start_with?("#{name}/") }
          require "sidekiq/fair_tenant/#{entry}" if entry # loaded on request by its entry point, not with the gem
          Sidekiq::FairTenant.const_get(const, false)
          exit!($LOADED_FEATURES.include?(File.join(root, file)) ? 0 : 3)
        rescue Exception => e # rubocop:disable Lint/RescueException
          warn "#{file}: #{e.class}: #{e.message}"
          exit!(1)
        end
        Process.wait(pid)
        file unless $?.success?
      end
      puts failed.join(" ")
    RUBY
    args = files.map { |file| "#{file}=#{expected[file].join("::")}" }
    out, err, status = Open3.capture3(RbConfig.ruby, "-I#{File.expand_path("../../lib", __dir__)}", "-e", script,
                                      root, *args)
    expect([out.strip, status.success?]).to eq(["", true]), err
  end
end

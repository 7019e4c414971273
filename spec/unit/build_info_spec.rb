# frozen_string_literal: true

require "spec_helper"

RSpec.describe "Sidekiq::FairTenant::Native.build_info" do
  subject(:info) { Sidekiq::FairTenant::Native.build_info }

  it "names the gem version, the Ruby, the Rust target and compiler the loaded binary was built with" do
    expect(info.keys).to eq(%i[gem_version ruby_version ruby_api_version ruby_arch target rustc profile])
    expect(info.values).to all(be_a(String).and(satisfy { |value| !value.empty? }))
    expect(info[:gem_version]).to eq(Sidekiq::FairTenant::VERSION)
    expect(info[:ruby_arch]).to eq(RbConfig::CONFIG["arch"])
    expect(info[:target]).to start_with("#{RbConfig::CONFIG["host_cpu"]}-").and include("-linux")
    expect(info[:profile]).to eq("release")
  end

  it "records the Ruby it was compiled against: same minor version and ABI as the one running it" do
    expect(info[:ruby_api_version]).to eq(RbConfig::CONFIG["ruby_version"])
    expect(info[:ruby_version]).to match(/\A\d+\.\d+\.\d+\z/)
    expect(info[:ruby_version][/\A\d+\.\d+/]).to eq(RUBY_VERSION[/\A\d+\.\d+/])
  end

  it "records a rustc at least as new as the crate's rust-version" do
    cargo_toml = File.read(File.expand_path("../../ext/fair_tenant_rs/Cargo.toml", __dir__))
    rust_version = cargo_toml[/^rust-version = "(.+)"/, 1]
    expect(info[:rustc]).to match(/\Arustc \d+\.\d+\.\d+/)
    expect(Gem::Version.new(info[:rustc][/\d+\.\d+\.\d+/])).to be >= Gem::Version.new(rust_version)
  end

  it "returns a new Hash on every call" do
    info[:gem_version] = "changed"
    expect(Sidekiq::FairTenant::Native.build_info[:gem_version]).to eq(Sidekiq::FairTenant::VERSION)
  end
end

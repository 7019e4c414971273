# frozen_string_literal: true

require "spec_helper"

# A scope's strings go into the job it caps (`fair_tenant_slot`, `fair_tenant_rate`): UTF-8 when their bytes are,
# so that Sidekiq.dump_json takes them on Ruby 3.3 (its generator refuses a binary string with bytes over 127).
RSpec.describe "Scope strings from the extension" do
  let(:slots) { Sidekiq::FairTenant::Native::Slots }

  it "are UTF-8 for a tenant or key that is, and Sidekiq's JSON carries them" do
    scopes = [slots.tenant_scope("café ☕", "fair"), slots.key_scope("api-é"),
              slots.job_scope(false, "café ☕", "fair", nil), slots.job_scope(true, "api-é", "fair", nil)]
    scopes.flatten.each { |s| expect(s.encoding).to eq(Encoding::UTF_8) }
    expect(Sidekiq.load_json(Sidekiq.dump_json("s" => scopes))["s"]).to eq(scopes)
    expect(scopes.first.join).to include("café ☕")
  end

  it "are binary, bytes as given, for a name that is not UTF-8" do
    tag, sub = slots.tenant_scope("bad\xFF".b, "fair")
    expect([tag.encoding, sub.encoding]).to include(Encoding::BINARY)
    expect((tag + sub).b).to include("bad\xFF".b)
  end
end

# frozen_string_literal: true

require "spec_helper"

RSpec.describe Sidekiq::FairTenant::Printable do
  {
    "acme" => "acme",
    "\e[31mRED\e[0m\e]0;pwned\a" => '\e[31mRED\e[0m\e]0;pwned\x07',
    "a\nb\tc\rd" => 'a\nb\tc\rd',
    "nul\0 del\x7f" => 'nul\x00 del\x7F',
    "c1 \u0085\u009b" => 'c1 \u{0085}\u{009B}',
    "bidi \u202A\u202E\u2066\u2069" => 'bidi \u{202A}\u{202E}\u{2066}\u{2069}',
    "back\\slash" => 'back\\\\slash',
    "ümlaut ✓ 日本" => "ümlaut ✓ 日本",
    "raw \xFF\xC3 ok".b => 'raw \xFF\xC3 ok',
    "half \xE2\x82".dup.force_encoding("UTF-8") => 'half \xE2\x82'
  }.each do |raw, shown|
    it "shows #{raw.inspect} as #{shown}" do
      out = described_class.call(raw)
      expect(out).to eq(shown)
      expect([out.encoding, out.valid_encoding?]).to eq([Encoding::UTF_8, true])
    end
  end

  it "keeps an escaped text apart from a text that looks like the escape" do
    expect(described_class.call("\e")).not_to eq(described_class.call('\e'))
  end

  it "converts other encodings to UTF-8 and shows what cannot be converted as bytes" do
    expect(described_class.call("caf\xE9".dup.force_encoding("ISO-8859-1"))).to eq("café")
    expect(described_class.call(:sym)).to eq("sym")
    expect(described_class.call(nil)).to eq("")
  end

  it "makes every String of a result printable, keys too, and leaves other values alone" do
    at = Time.now
    result = { tenant: "t\e", n: 1, at: at, state: :waiting, rows: [{ "k\n" => ["\a", nil, 2.5] }] }
    expect(described_class.deep(result))
      .to eq(tenant: 't\e', n: 1, at: at, state: :waiting, rows: [{ 'k\n' => ['\x07', nil, 2.5] }])
  end

  it "writes exact JSON with no DEL, C1 or bidi character left raw" do
    value = { tenant: "\e[31m\x7f\u009b\u202e\u2066\\ ü\n", n: [1, nil] }
    json = described_class.json(value)
    expect(json).not_to match(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/)
    expect(json).to include('\u007f\u009b\u202e\u2066').and include("ü")
    expect(JSON.parse(json, symbolize_names: true)).to eq(value)
  end

  it "is used by the gem's log lines" do
    log = StringIO.new
    Sidekiq::FairTenant.configure { |c| c.logger = Logger.new(log) }
    Sidekiq::FairTenant.warn(:printable_spec, "k") { "job Evil\e[31mJob of tenant \e]52;c;aGk=\a" }
    expect(log.string).to include('[sidekiq-fair_tenant] job Evil\e[31mJob of tenant \e]52;c;aGk=\x07')
    expect(log.string.b).not_to match(/[\x00-\x09\x0b-\x1f\x7f]/n)
  ensure
    Sidekiq::FairTenant.configure { |c| c.logger = nil }
    Sidekiq::FairTenant.warnings.reset
  end
end

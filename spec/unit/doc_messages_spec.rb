# frozen_string_literal: true

require "spec_helper"
require "fileutils"
require "tmpdir"
require_relative "../support/doc_messages"

# Every error message README.md and docs/*.md quote is one the code prints.
#
# Convention (spec/support/doc_messages.rb has the rule, docs/DEVELOPMENT.md states it): a doc quotes an error
# message as a code span right after an error class's name (`ArgumentError`, in backticks or not) or one of the
# words raises, prints, logs, warns, error, message, "naming it", with an optional colon between:
#
#   raises `Sidekiq::FairTenant::MissingExtensionError`: ``sidekiq-fair_tenant-rs has no native extension ...``
#   the process logs `fair queues refused: sidekiq-fair_tenant:fair:format is 4, this gem knows format 3 ...`
#
# A span of fewer than three words is a name, not a message; fenced code blocks are not read; a message may wrap,
# and may be the part of a longer one. Each quote is checked by triggering the message for real where a trigger
# below knows how (the quote's own values, such as a version, drive it), else by finding it in a string literal
# of lib/ or ext/ (Rust unit tests left out) whose interpolations and format placeholders stand for any text.
RSpec.describe "Error messages quoted in README.md and docs/" do
  root = File.expand_path("../..", __dir__)
  files = ["README.md", *Dir.glob("docs/*.md", base: root).sort]
  messages = DocMessages.new(root, files)

  # A quote's shape => what the code prints for the values the quote names.
  triggers = {
    /\Athe Redis server is redis (\d+\.\d+\.\d+), / => lambda do |m|
      Sidekiq::FairTenant::Native::ServerCheck.problem("# Server\r\nredis_version:#{m[1]}\r\n", true)
    end,
    /\ASidekiq::FairTenant\.rates: invalid fair_tenant_rate (\S+): / => lambda do |m|
      Sidekiq::FairTenant.rates.set(m[1], tenant: "doc-messages")
    rescue ArgumentError => e
      e.message
    end,
    /no native extension for Ruby (\d+\.\d+) \([^)]*\); this copy carries Ruby ([\d., ]+) only/ => lambda do |m|
      Dir.mktmpdir("doc-messages") do |dir|
        m[2].split(", ").each do |minor|
          FileUtils.mkdir_p(File.join(dir, minor))
          File.write(File.join(dir, minor, Sidekiq::FairTenant::NativeLoader::FILE), "")
        end
        Sidekiq::FairTenant::NativeLoader.require_extension(dir, "#{m[1]}.0")
      rescue Sidekiq::FairTenant::MissingExtensionError => e
        e.message.sub("(#{RUBY_PLATFORM})", m[0][/\([^)]*\)/])
      end
    end,
    /\Afair queues refused: \S+ is (\S+), / => lambda do |m|
      check = Sidekiq::FairTenant::FairFetch::FormatCheck
      log = StringIO.new
      allow(Sidekiq).to receive(:logger).and_return(Logger.new(log))
      check.reset!
      redis.set(Sidekiq::FairTenant::Native::Fair.format_key, m[1])
      Sidekiq.redis { |conn| check.ok?(conn) }
      log.string
    ensure
      check.reset!
      redis.del(Sidekiq::FairTenant::Native::Fair.format_key)
    end
  }

  it "finds the messages the docs quote" do
    expect(messages.quotes.map(&:file)).to include("docs/INSTALL.md", "docs/CAPS.md", "docs/PACKAGING.md")
  end

  messages.quotes.each do |quote|
    it "#{quote.file}:#{quote.line} quotes a message the code prints: #{quote.text[0, 60]}..." do
      trigger = triggers.find { |shape, _| quote.text.match?(shape) }
      if trigger
        printed = instance_exec(quote.text.match(trigger.first), &trigger.last)
        expect(printed.to_s).to include(quote.text)
      else
        expect(messages.in_sources?(quote.text)).to be(true), "no trigger and no literal of lib/ or ext/ prints it"
      end
    end
  end

  describe DocMessages do
    around do |example|
      Dir.mktmpdir("doc-messages") do |dir|
        @dir = dir
        example.run
      end
    end

    def write(path, text)
      FileUtils.mkdir_p(File.dirname(File.join(@dir, path)))
      File.write(File.join(@dir, path), text)
    end

    it "reads quotes by the convention, and finds only what a literal can print" do
      write("lib/a.rb", <<~'RUBY')
        raise ArgumentError, "#{name}: limit must be " \
          "an Integer >= 1"
      RUBY
      write("ext/b.rs", %(fn f() { format!("the server {} lacks {}: upgrade it") }\n) +
                        %(#[cfg(test)]\nmod tests { const T: &str = "the test only says this"; }\n))
      write("docs/A.md", <<~MD)
        Raises `ArgumentError`: `Job: limit must be an Integer >= 1`; it prints
        `the server redis 4 lacks ZADD: upgrade it`, logs `the test only says this` and says `place: :rated`.

        ```
        error: `in a fenced block it is no quote`
        ```
      MD
      found = DocMessages.new(@dir, ["docs/A.md"])

      expect(found.quotes.map { |q| [q.line, q.text] }).to eq(
        [[1, "Job: limit must be an Integer >= 1"], [2, "the server redis 4 lacks ZADD: upgrade it"],
         [2, "the test only says this"]]
      )
      expect(found.quotes.map { |q| found.in_sources?(q.text) }).to eq([true, true, false])
    end
  end
end

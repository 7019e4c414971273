# frozen_string_literal: true

require "fileutils"
require "tmpdir"
require_relative "../support/doc_links"

RSpec.describe "Links in README.md and docs/" do
  root = File.expand_path("../..", __dir__)
  files = ["README.md", *Dir.glob("docs/*.md", base: root).sort]

  it "resolve: every relative link names a file that exists, every #anchor a heading of it" do
    expect(DocLinks.new(root, files).problems).to eq([])
  end

  it "reach every page of docs/ from the README" do
    linked = DocLinks.new(root, ["README.md"]).links.map { |link| link.target.split("#").first }
    expect(files - ["README.md"] - linked).to eq([])
  end

  describe DocLinks do
    around do |example|
      Dir.mktmpdir("doc-links") do |dir|
        @dir = dir
        example.run
      end
    end

    def write(path, text)
      FileUtils.mkdir_p(File.dirname(File.join(@dir, path)))
      File.write(File.join(@dir, path), text)
    end

    it "reports a missing file, a missing anchor and an anchor into a file that is not Markdown" do
      write("docs/a.png", "")
      write("docs/B.md", "# Title\n\n## What differs from `sidekiq-fair_tenant`\n\n## Usage\n\n## Usage\n")
      write("README.md", <<~MD)
        # Readme
        [ok](docs/B.md#what-differs-from-sidekiq-fair_tenant) [ok](docs/B.md#usage-1) [ok](#readme)
        ![ok](docs/a.png) [ok](https://example.com/x.md) [ok][ref] [ok](docs/)

        [gone](docs/C.md) [bad](docs/B.md#usage-2) [bad](#nowhere) [bad](docs/a.png#top) [bad][bad]

        `[code span](docs/none.md)`

        ```
        [in a code block](docs/none.md)
        ```

        [ref]: docs/B.md#title
        [bad]: docs/B.md#nope
      MD

      expect(DocLinks.new(@dir, ["README.md"]).problems).to eq(
        [
          "README.md: docs/C.md: no such file docs/C.md",
          "README.md: docs/B.md#usage-2: no heading with anchor #usage-2 in docs/B.md",
          "README.md: #nowhere: no heading with anchor #nowhere in README.md",
          "README.md: docs/a.png#top: docs/a.png is not Markdown, it has no headings",
          "README.md: docs/B.md#nope: no heading with anchor #nope in docs/B.md"
        ]
      )
    end

    it "makes GitHub's anchors: lower case, punctuation dropped, spaces as hyphens" do
      expect(DocLinks.slug("Re-routing (the original gem's API)")).to eq("re-routing-the-original-gems-api")
      expect(DocLinks.slug("Fair queues: fair order at fetch time")).to eq("fair-queues-fair-order-at-fetch-time")
      expect(DocLinks.slug("What differs from [sidekiq-fair_tenant](x)")).to eq("what-differs-from-sidekiq-fair_tenant")
    end
  end
end

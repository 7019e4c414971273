# frozen_string_literal: true

require "uri"

# The relative links of Markdown files, checked as GitHub renders them: each names a file or directory that exists
# and, with a `#fragment`, a heading of that Markdown file (GitHub's anchors: lower case, punctuation dropped,
# spaces as hyphens, `-1`, `-2` for a repeated heading). Code blocks and code spans are not read.
class DocLinks
  INLINE = /!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/
  REFERENCE = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/
  EXTERNAL = %r{\A(?:[a-z][a-z0-9+.-]*:|//)}i
  FENCE = /^ {0,3}(`{3,}|~{3,})/
  HEADING = /^ {0,3}(\#{1,6})\s+(.*?)(?:\s+#+)?\s*$/
  CODE_SPAN = /(`+).+?\1/

  Link = Struct.new(:file, :target)

  def self.slug(heading)
    text = heading.gsub(/!?\[([^\]]*)\]\([^)]*\)/, '\1').delete("`*")
    text.downcase.gsub(/[^\p{L}\p{N}\p{M} _-]/, "").tr(" ", "-")
  end

  # The lines outside fenced code blocks (those inside become empty lines).
  def self.outside_code_blocks(text)
    fence = nil
    text.each_line.map do |line|
      opening = line[FENCE, 1]
      if opening && (fence.nil? || opening.start_with?(fence))
        fence = fence ? nil : opening
        "\n"
      else
        fence ? "\n" : line
      end
    end
  end

  def self.anchors(text)
    seen = Hash.new(-1)
    outside_code_blocks(text).join.scan(HEADING).map do |_, heading|
      slug = slug(heading)
      seen[slug] += 1
      seen[slug].zero? ? slug : "#{slug}-#{seen[slug]}"
    end
  end

  def self.targets(text)
    prose = outside_code_blocks(text).map { |line| line.gsub(CODE_SPAN) { |span| " " * span.size } }.join
    (prose.scan(INLINE) + prose.scan(REFERENCE)).map(&:first).grep_v(EXTERNAL)
  end

  def initialize(root, files)
    @root = root
    @files = files
  end

  def links
    @links ||= @files.flat_map do |file|
      self.class.targets(File.read(File.join(@root, file))).map { |target| Link.new(file, target) }
    end
  end

  # One line per broken link: "file: target: what is wrong".
  def problems
    links.filter_map do |link|
      problem = problem(link)
      "#{link.file}: #{link.target}: #{problem}" if problem
    end
  end

  private

  def problem(link)
    path, fragment = link.target.split("#", 2)
    file = path.empty? ? link.file : File.join(File.dirname(link.file), URI.decode_www_form_component(path))
    full = File.expand_path(file, @root)
    return "no such file #{relative(full)}" unless File.exist?(full)
    return if fragment.nil?
    return "#{relative(full)} is not Markdown, it has no headings" unless full.end_with?(".md")

    "no heading with anchor ##{fragment} in #{relative(full)}" unless anchors(full).include?(fragment)
  end

  def anchors(full)
    (@anchors ||= {})[full] ||= self.class.anchors(File.read(full))
  end

  def relative(full)
    full.delete_prefix("#{@root}/")
  end
end

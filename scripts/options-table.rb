#!/usr/bin/env ruby
# frozen_string_literal: true
#
# Renders src/core/options.def, Mosaic's one table of options (the environment variables it
# reads), as the Markdown table the README carries between its options markers.
#
#   scripts/options-table.rb                    print the table
#   scripts/options-table.rb --write README.md  rewrite the README's table in place
#   scripts/options-table.rb --check README.md  exit 1 if the README's table differs
#
# Any Ruby 2.7 or later runs it. test/test_options.rb loads it as a library (MosaicOptions) to
# check the README and that every variable src/ reads has a row.
module MosaicOptions
  DEF_PATH = File.expand_path("../src/core/options.def", __dir__)
  BEGIN_MARK = "<!-- options:begin -->"
  END_MARK = "<!-- options:end -->"

  # One row of options.def. kind: :size, :number, :switch, :custom or :elsewhere. default,
  # min, lower and upper hold source text (lower and upper may be [:param, field]; upper nil
  # when there is none); default_text and accepts are the custom and elsewhere rows' own text;
  # config is nil, [:rw, key] or [:read, key].
  Row = Struct.new(:kind, :name, :field, :default, :min, :lower, :upper, :zero_ok, :reader, :file,
                   :default_text, :accepts, :build, :config, :doc, keyword_init: true)

  ARGS = {
    "SIZE" => %i[name field default min build config doc],
    "NUMBER" => %i[name field default lower upper zero_ok build config doc],
    "SWITCH" => %i[name field default build config doc],
    "CUSTOM" => %i[name reader default_text accepts build config doc],
    "ELSEWHERE" => %i[name file default_text accepts build config doc],
  }.freeze

  module_function

  # The rows, in the file's order.
  def parse(text = File.read(DEF_PATH, encoding: "UTF-8"))
    tokens = tokenize(text)
    rows = []
    i = 0
    while i < tokens.size
      tok = tokens[i]
      if tok.is_a?(Symbol) && tok.to_s.start_with?("MOSAIC_OPTION_") && tokens[i + 1] == "("
        kind = tok.to_s.delete_prefix("MOSAIC_OPTION_")
        names = ARGS.fetch(kind) { raise ArgumentError, "options.def: unknown row kind #{tok}" }
        args, i = arguments(tokens, i + 2)
        unless args.size == names.size
          raise ArgumentError, "options.def: #{tok} takes #{names.size} arguments, got #{args.size}: #{args.inspect}"
        end
        rows << row(kind.downcase.to_sym, names.zip(args).to_h)
      else
        i += 1
      end
    end
    rows
  end

  # C tokens, enough for options.def: comments dropped, adjacent string literals joined (as
  # Strings), identifiers as Symbols, numbers and punctuation as Strings.
  def tokenize(text)
    tokens = []
    s = text
    pos = 0
    while pos < s.size
      c = s[pos]
      if s[pos, 2] == "/*"
        pos = s.index("*/", pos + 2) or raise ArgumentError, "options.def: unterminated comment"
        pos += 2
      elsif s[pos, 2] == "//"
        pos = s.index("\n", pos) || s.size
      elsif c =~ /\s/
        pos += 1
      elsif c == '"'
        str = +""
        pos += 1
        until s[pos] == '"'
          raise ArgumentError, "options.def: unterminated string" if pos >= s.size
          if s[pos] == "\\"
            str << s[pos + 1]
            pos += 2
          else
            str << s[pos]
            pos += 1
          end
        end
        pos += 1
        if tokens.last.is_a?(String) && tokens.last.instance_variable_get(:@literal)
          tokens.last << str
        else
          str.instance_variable_set(:@literal, true)
          tokens << str
        end
      elsif (m = /\A[A-Za-z_]\w*/.match(s[pos..]))
        tokens << m[0].to_sym
        pos += m[0].size
      elsif (m = /\A[0-9][0-9A-Za-z_.]*/.match(s[pos..]))
        tokens << m[0]
        pos += m[0].size
      else
        tokens << c
        pos += 1
      end
    end
    tokens
  end

  # The arguments of a macro call whose "(" was just before `i`: each a list of tokens.
  def arguments(tokens, i)
    args = [[]]
    depth = 0
    loop do
      tok = tokens.fetch(i) { raise ArgumentError, "options.def: unterminated row" }
      i += 1
      if tok == "(" then depth += 1
      elsif tok == ")"
        break if depth.zero?
        depth -= 1
      elsif tok == "," && depth.zero?
        args << []
        next
      end
      args.last << tok
    end
    [args, i]
  end

  def row(kind, args)
    r = Row.new(kind: kind)
    args.each do |key, toks|
      r[key] =
        case key
        when :name, :doc, :file, :default_text, :accepts then string(toks, key)
        when :field, :reader then identifier(toks, key)
        when :default, :min then number(toks, key)
        when :lower then bound(toks, key)
        when :upper then toks == [:NO_UPPER] ? nil : bound(toks, key)
        when :zero_ok
          raise ArgumentError, "options.def: ZERO_OK or NO_ZERO, got #{toks.inspect}" unless [[:ZERO_OK], [:NO_ZERO]].include?(toks)
          toks == [:ZERO_OK]
        when :build
          raise ArgumentError, "options.def: bad build #{toks.inspect}" unless [[:ALL], [:CHECKING], [:HISTOGRAM]].include?(toks)
          toks.first
        when :config
          if toks == [:NO_CONFIG] then nil
          elsif toks.size == 4 && %i[CONFIG CONFIG_READ].include?(toks[0]) && toks[1] == "(" && toks[3] == ")"
            [toks[0] == :CONFIG ? :rw : :read, toks[2].to_s]
          else raise ArgumentError, "options.def: bad GC.config key #{toks.inspect}"
          end
        end
    end
    r
  end

  def string(toks, key)
    raise ArgumentError, "options.def: #{key} must be a string, got #{toks.inspect}" unless toks.size == 1 && toks[0].is_a?(String) && toks[0].instance_variable_get(:@literal)
    toks[0].dup
  end

  def identifier(toks, key)
    raise ArgumentError, "options.def: #{key} must be an identifier, got #{toks.inspect}" unless toks.size == 1 && toks[0].is_a?(Symbol)
    toks[0].to_s
  end

  # A number as written, or MIB(n) as "MIB(n)".
  def number(toks, key)
    return toks[0] if toks.size == 1 && toks[0].is_a?(String) && toks[0] =~ /\A[0-9]/
    return "MIB(#{toks[2]})" if toks.size == 4 && toks[0] == :MIB && toks[2] =~ /\A[0-9]+\z/
    raise ArgumentError, "options.def: #{key} must be a number or MIB(n), got #{toks.inspect}"
  end

  def bound(toks, key)
    if toks.size == 4 && toks[0] == :PARAM && toks[1] == "(" && toks[3] == ")"
      [:param, toks[2].to_s]
    else
      number(toks, key)
    end
  end

  # The value a size or number stands for (MIB(16): 16777216).
  def value(text)
    return Integer(text[/\d+/]) << 20 if text.start_with?("MIB(")
    text =~ /\A\d+\z/ ? Integer(text) : Float(text)
  end

  # ---------------------------------------------------------------- Markdown

  def markdown(rows = parse)
    fields = rows.select(&:field).to_h { |r| [r.field, r.name] }
    lines = ["| Variable | Default | Accepts | `GC.config` key | Meaning |", "|---|---|---|---|---|"]
    rows.each do |r|
      cells = ["`#{r.name}`", default_cell(r), accepts_cell(r, fields), config_cell(r), meaning_cell(r)]
      lines << "| #{cells.map { |c| c.gsub("|", "\\|") }.join(' | ')} |"
    end
    lines.join("\n") + "\n"
  end

  def default_cell(r)
    case r.kind
    when :size then r.default.start_with?("MIB(") ? "#{r.default[/\d+/]}M" : r.default
    when :number then r.default
    when :switch then r.default == "0" ? "0 (off)" : "1 (on)"
    else r.default_text
    end
  end

  def accepts_cell(r, fields)
    case r.kind
    when :size then r.min == "0" ? "a size, 0 or more" : "a size, at least #{r.min}"
    when :switch then "0 or 1"
    when :number
      shown = ->(b) { b.is_a?(Array) ? "`#{fields.fetch(b[1]) { raise ArgumentError, "options.def: no row sets #{b[1]}" }}`" : b }
      lower, upper = shown[r.lower], r.upper && shown[r.upper]
      if r.zero_ok && !r.lower.is_a?(Array) && value(r.lower).zero?
        upper ? "0 to #{upper}" : "0 or more"
      elsif r.zero_ok
        "0, or more than #{lower}#{upper ? " and at most #{upper}" : ''}"
      else
        "more than #{lower}#{upper ? ", at most #{upper}" : ''}"
      end
    else r.accepts
    end
  end

  def config_cell(r)
    return "" unless r.config
    access, key = r.config
    access == :rw ? "`#{key}`" : "`#{key}` (read only)"
  end

  def meaning_cell(r)
    case r.build
    when :CHECKING then "#{r.doc}; checking build only"
    when :HISTOGRAM then "#{r.doc}; size-histogram build only"
    else r.doc
    end
  end

  # `text` with the part between the markers replaced by `table`.
  def splice(text, table = markdown)
    pattern = /^#{Regexp.escape(BEGIN_MARK)}\n.*?^#{Regexp.escape(END_MARK)}$/m
    raise ArgumentError, "no #{BEGIN_MARK} ... #{END_MARK} part" unless text.match?(pattern)
    text.sub(pattern) { "#{BEGIN_MARK}\n#{table}#{END_MARK}" }
  end

  # The table the text carries between the markers, or nil.
  def carried(text)
    text[/^#{Regexp.escape(BEGIN_MARK)}\n(.*?)^#{Regexp.escape(END_MARK)}$/m, 1]
  end
end

if $PROGRAM_NAME == __FILE__
  case ARGV
  in []
    print MosaicOptions.markdown
  in ["--write", path]
    text = File.read(path, encoding: "UTF-8")
    updated = MosaicOptions.splice(text)
    File.write(path, updated) unless updated == text
    puts updated == text ? "#{path}: options table up to date" : "#{path}: options table rewritten"
  in ["--check", path]
    if MosaicOptions.carried(File.read(path, encoding: "UTF-8")) == MosaicOptions.markdown
      puts "#{path}: options table up to date"
    else
      warn "#{path}: the options table differs from src/core/options.def; run scripts/options-table.rb --write #{path}"
      exit 1
    end
  else
    warn "usage: #{$PROGRAM_NAME} [--write FILE | --check FILE]"
    exit 2
  end
end

require_relative "helper"
require_relative "../scripts/options-table"

# The one table of options, src/core/options.def: the README carries its rendering, and every
# environment variable src/ reads has a row (a row whose variable is not read fails too).
# test_env.rb checks the rows' ranges, defaults and GC.config keys against the library.
class TestMosaicOptions < Test::Unit::TestCase
  ROOT = File.expand_path("..", __dir__)
  # The calls that read a variable: getenv, and config.c's parsers.
  READERS = /\b(?:secure_getenv|getenv|env_size|env_double)\s*\(\s*([^,)]*)/

  def rows
    @rows ||= MosaicOptions.parse
  end

  def test_readme_carries_the_generated_table
    readme = File.read(File.join(ROOT, "README.md"), encoding: "UTF-8")
    carried = MosaicOptions.carried(readme)
    assert_not_nil carried, "README.md has no #{MosaicOptions::BEGIN_MARK} ... #{MosaicOptions::END_MARK} part"
    assert_equal MosaicOptions.markdown(rows), carried,
                 "README.md's options table is not src/core/options.def's: run scripts/options-table.rb --write README.md"
  end

  def test_every_variable_read_has_a_row_and_every_row_is_read
    names = rows.map(&:name)
    assert_equal names.uniq, names, "a variable with two rows"
    read = Hash.new { |h, k| h[k] = [] }   # name read by a literal => ["file:line"]
    problems = []
    Dir[File.join(ROOT, "src/**/*.{c,h}")].sort.each do |path|
      file = path.delete_prefix("#{ROOT}/")
      code = without_comments(File.read(path, encoding: "UTF-8"))
      code.to_enum(:scan, READERS).each do
        arg = $1.strip
        at = "#{file}:#{code[0, $~.begin(0)].count("\n") + 1}"
        if arg =~ /\A"([^"]*)"\z/
          read[$1] << at
          problems << "#{at} reads #{$1}, which has no row in src/core/options.def" unless names.include?($1)
        elsif file != "src/core/config.c"
          # config.c's readers take the table's names; anywhere else a computed name escapes it.
          problems << "#{at} reads a variable by a computed name (#{arg}): read it through src/core/options.def"
        end
      end
    end

    config = File.read(File.join(ROOT, "src/core/config.c"), encoding: "UTF-8")
    from_env = config[/^mosaic_params_from_env\(.*?^}/m]
    assert_not_nil from_env, "config.c has no mosaic_params_from_env"
    assert_match(/^#include "core\/options\.def"$/, from_env, "mosaic_params_from_env does not expand the table")
    readers = rows.select { |r| r.kind == :custom }.map(&:reader)
    config.scan(/^(read_\w+)\(const char \*name, struct mosaic_params \*params\)$/) do |(reader)|
      problems << "config.c's #{reader} reads a variable that has no row in src/core/options.def" unless readers.include?(reader)
    end
    rows.each do |r|
      case r.kind
      when :custom
        problems << "#{r.name}: its reader #{r.reader} is not defined in config.c" unless config.match?(/^#{r.reader}\(const char \*name, struct mosaic_params \*params\)$/)
      when :elsewhere
        unless read[r.name].any? { |at| at.start_with?("#{r.file}:") }
          problems << "#{r.name}: its row says #{r.file} reads it, which it does not"
        end
      end
    end
    assert_empty problems
  end

  # The README lists each variable once, in its table; its prose may name a few.
  def test_readme_has_no_second_options_table
    readme = File.read(File.join(ROOT, "README.md"), encoding: "UTF-8")
    outside = MosaicOptions.splice(readme, "")
    assert_not_match(/^\| *`?(MOSAIC|RUBY_GC)_[A-Z_<>i]+`? *\|/, outside)
  end

  private

  # C source with its comments blanked, newlines kept (for line numbers); string literals are
  # left alone.
  def without_comments(code)
    code.gsub(%r{"(?:\\.|[^"\\\n])*"|/\*.*?\*/|//[^\n]*}m) do |m|
      m.start_with?('"') ? m : m.gsub(/[^\n]/, " ")
    end
  end
end

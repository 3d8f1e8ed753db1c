# Shared setup for Mosaic's own tests. They run on the project's Ruby with CRuby's test
# framework (tool/lib, minitest-derived), which gives assert_separately: each risky case runs
# in a child Ruby, so a crash is a reported failure with its output, not a dead runner.
require "test/unit"

module MosaicTestHelper
  GC_NAME = ENV.fetch("RUBY_GC_LIBRARY", "default")

  def mosaic?
    GC_NAME == "mosaic"
  end

  # Runs `code` in a child Ruby under the same GC and asserts it exits cleanly.
  def assert_gc_script(code, timeout: 120, env: {}, args: [], message: nil)
    assert_separately([env, *args], <<~PRELUDE + code, timeout: timeout)
      raise "wrong GC: \#{GC.config[:implementation]}" unless GC.config[:implementation] == #{GC_NAME.dump}
    PRELUDE
  end
end

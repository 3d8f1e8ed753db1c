# Shared setup for Mosaic's own tests. They run on the project's Ruby with CRuby's test
# framework (tool/lib, minitest-derived), which gives assert_separately: each risky case runs
# in a child Ruby, so a crash is a reported failure with its output, not a dead runner.
require "test/unit"
require "rbconfig"
require "tmpdir"
require "open3"
require "fileutils"

module MosaicTestHelper
  # The library file loaded (librubygc.LIB_NAME.so), and the collector it must report itself
  # as: the same, unless MOSAIC_EXPECT_GC says otherwise (e.g. a checking build installed as
  # librubygc.mosaic_check.so still reports "mosaic").
  LIB_NAME = ENV.fetch("RUBY_GC_LIBRARY", "default")
  GC_NAME = ENV.fetch("MOSAIC_EXPECT_GC", LIB_NAME)

  def mosaic?
    GC_NAME == "mosaic"
  end

  # Whether the library loaded is the checking build (make CHECK=1; the stress gate's).
  def checking_build?
    defined?(GC::OPTS) && GC::OPTS.include?("MOSAIC_CHECK")
  end

  # Whether the library loaded is a sanitized checking build (make ASAN=1, the asan gate's, or
  # make TSAN=1, scripts/tsan-gate.sh's). ASan's allocator aborts on a request over its 1 TiB
  # maximum instead of returning NULL, and with allocator_may_return_null=1 it warns on stderr
  # (TSan's has the same maximum); their GC runs several times slower.
  def sanitized_build?
    defined?(GC::OPTS) && (GC::OPTS.include?("MOSAIC_ASAN") || GC::OPTS.include?("MOSAIC_TSAN"))
  end

  # Whether the library loaded is the ThreadSanitizer build (make TSAN=1). Its collections run
  # tens of times slower (a minor GC of 3 ms takes over 16 ms, the pacer's floor for marking in
  # steps), and every access of its code to memory is recorded in TSan's shadow memory, which a
  # forked child then writes as its own: pause-driven pacing and a child's private memory are
  # not the GC's own figures there.
  def tsan_build?
    defined?(GC::OPTS) && GC::OPTS.include?("MOSAIC_TSAN")
  end

  # Runs `code` in a child Ruby under the same GC and asserts it exits cleanly.
  #
  # The script may call rounds(n) for how many times to repeat a round that exists to provoke
  # collections: n, or a fifth of n (at least 2) under the stress gate. There a verified
  # collection every MOSAIC_STRESS_MINOR allocations makes a script's cost its allocations times
  # its heap, and each round already collects dozens of times; the release-build gates run
  # every round.
  def assert_gc_script(code, timeout: 120, env: {}, args: [], message: nil, ignore_stderr: false)
    assert_separately([env, *args], <<~PRELUDE + code, timeout: timeout, ignore_stderr: ignore_stderr)
      raise "wrong GC: \#{GC.config[:implementation]}" unless GC.config[:implementation] == #{GC_NAME.dump}
      def rounds(n) = ENV["MOSAIC_STRESS_MINOR"] ? [n / 5, 2].max : n
    PRELUDE
  end
  # Builds test/ext/NAME.c with this Ruby (under the default GC: the build is not what is
  # tested), once per test run; returns the .so path, for a script to require.
  def built_extension(name)
    MosaicTestHelper.extensions[name] ||= begin
      dir = Dir.mktmpdir(name)
      at_exit { FileUtils.rm_rf(dir) }
      FileUtils.cp(File.expand_path("ext/#{name}.c", __dir__), dir)
      env = { "RUBY_GC_LIBRARY" => "default", "RUBYOPT" => nil }
      out, st = Open3.capture2e(env, RbConfig.ruby, "-rmkmf", "-e",
                                "$CFLAGS << ' -Werror=implicit-function-declaration'; create_makefile(#{name.dump})", chdir: dir)
      out2, st2 = Open3.capture2e(env, "make", chdir: dir) if st.success?
      so = File.join(dir, "#{name}.so")
      raise "building test/ext/#{name}.c failed:\n#{out}#{out2}" unless st.success? && st2&.success? && File.file?(so)
      so
    end
  end

  def self.extensions = (@extensions ||= {})
end

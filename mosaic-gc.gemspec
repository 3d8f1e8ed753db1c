# The mosaic-gc gem: `gem build mosaic-gc.gemspec` in a checkout makes mosaic-gc-VERSION.gem;
# `gem install` compiles Mosaic with the Ruby that runs gem, from that Ruby's installed headers
# alone, and installs librubygc.mosaic.so into its RbConfig::CONFIG["modular_gc_dir"]
# (ext/mosaic_gc/extconf.rb); `gem uninstall` removes that file again (lib/rubygems_plugin.rb).
# Nothing is downloaded at install time: the gem holds the sources.
Gem::Specification.new do |s|
  s.name = "mosaic-gc"
  s.version = File.read(File.join(__dir__, "VERSION")).strip
  s.summary = "Mosaic, a garbage collector for CRuby 3.4 (a Modular GC library)"
  s.description = "Installs librubygc.mosaic.so into a Ruby 3.4 configured --with-modular-gc; " \
                  "run Ruby with RUBY_GC_LIBRARY=mosaic to use it."
  s.authors = ["The Mosaic developers"]
  s.required_ruby_version = "~> 3.4.0"
  s.files = Dir.chdir(__dir__) do
    Dir["src/**/*.{c,h,def}", "ext/mosaic_gc/extconf.rb", "lib/rubygems_plugin.rb",
        "scripts/ruby-check.sh", "scripts/toolchain.sh", "Makefile", "VERSION", "README.md", "CHANGELOG.md"]
  end
  s.extensions = ["ext/mosaic_gc/extconf.rb"]
end

# RubyGems plugin of the mosaic-gc gem: `gem uninstall mosaic-gc` removes the GC library its install
# put into the Ruby's modular_gc_dir (the path ext/mosaic_gc/extconf.rb recorded in installed.txt).
# A library another version of the gem installed under the same name is removed with the last of
# them only.
Gem.pre_uninstall do |uninstaller|
  spec = uninstaller.spec
  next unless spec.name == "mosaic-gc"
  record = File.join(spec.gem_dir, "ext", "mosaic_gc", "installed.txt")
  next unless File.file?(record)
  others = Gem::Specification.select { |s| s.name == "mosaic-gc" && s.full_name != spec.full_name }
  kept = others.flat_map do |s|
    r = File.join(s.gem_dir, "ext", "mosaic_gc", "installed.txt")
    File.file?(r) ? File.readlines(r, chomp: true) : []
  end
  File.readlines(record, chomp: true).each do |path|
    next if path.empty? || kept.include?(path) || !File.file?(path)
    File.delete(path)
    warn "mosaic-gc: removed #{path}"
  end
end

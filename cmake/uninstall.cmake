# make uninstall: removes each file install_manifest.txt lists (what the
# last `make install` wrote; under $DESTDIR when it is set), then the directories of ours
# it leaves empty. Files someone changed since (the config) are removed as
# well: uninstall is the opposite of install.
if(NOT EXISTS "${MANIFEST}")
  message(FATAL_ERROR "nothing to uninstall: ${MANIFEST} is missing (run make install first)")
endif()
file(STRINGS "${MANIFEST}" files)
set(dirs)
foreach(f ${files})
  set(f "$ENV{DESTDIR}${f}")
  if(IS_SYMLINK "${f}" OR EXISTS "${f}")
    message(STATUS "Removing ${f}")
    file(REMOVE "${f}")
  endif()
  # its directory and those above it up to one named airlock
  get_filename_component(d "${f}" DIRECTORY)
  while(d MATCHES "/airlock(/.*)?$")
    list(APPEND dirs "${d}")
    get_filename_component(d "${d}" DIRECTORY)
  endwhile()
endforeach()
# our own directories, deepest first, when empty
list(REMOVE_DUPLICATES dirs)
list(SORT dirs ORDER DESCENDING)
foreach(d ${dirs})
  if(IS_DIRECTORY "${d}" AND NOT IS_SYMLINK "${d}")
    file(GLOB left "${d}/*")
    if(NOT left)
      file(REMOVE_RECURSE "${d}")
    endif()
  endif()
endforeach()
file(REMOVE "${MANIFEST}")

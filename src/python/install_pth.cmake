# Copies PTH into each folder of SITE_DIRS that exists and is writable (cmake -P script).
foreach(dir IN LISTS SITE_DIRS)
  execute_process(COMMAND ${CMAKE_COMMAND} -E make_directory ${dir} OUTPUT_QUIET ERROR_QUIET)
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${PTH} ${dir}/fpgallm.pth
                  RESULT_VARIABLE status OUTPUT_QUIET ERROR_QUIET)
  if(NOT status EQUAL 0)
    message(STATUS "fpgallm.pth: ${dir} is not writable; use PYTHONPATH=<repo>/python")
  endif()
endforeach()

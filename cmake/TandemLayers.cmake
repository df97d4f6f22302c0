# One static library per directory of src/, each seeing only the headers of the
# layers it declares (the build's own rule, not a convention):
#
#   tandem_layer(NAME [CUDA] [PUBLIC layers...] [PRIVATE layers...] [LIBS targets...]
#                [PRIVATE_LIBS targets...])
#
# builds tandem_NAME from src/NAME/**/*.cpp; with CUDA, also from src/NAME/**/*.cu
# when the CUDA kernels are built (cmake/TandemCuda.cmake), linking cudart
# statically and defining TANDEM_HAVE_CUDA for the layer and its users. Its own
# sources see all of src/NAME (subdirectories such as kernels/cpu are its
# internals); other layers see only the headers at the top of src/NAME. A layer
# compiles against the headers of its PUBLIC and PRIVATE layers (and of what
# those expose publicly) and nothing else:
# an #include of an undeclared layer is a compile error, and a call into one a
# link error in every executable that does not link that layer for its own sake.
# PUBLIC layers are those its own headers include (its users need them too).
#
# The views are folders of symbolic links under build/layers/, made at configure
# time; adding a header re-runs the configure step (CONFIGURE_DEPENDS).
function(tandem_layer name)
  cmake_parse_arguments(L "CUDA" "" "PUBLIC;PRIVATE;LIBS;PRIVATE_LIBS" ${ARGN})
  set(src ${CMAKE_SOURCE_DIR}/src/${name})
  set(view ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${view})
  # Own view: the whole directory.
  file(MAKE_DIRECTORY ${view}/own)
  file(CREATE_LINK ${src} ${view}/own/${name} SYMBOLIC)
  # Public view: the top-level headers only.
  file(MAKE_DIRECTORY ${view}/public/${name})
  file(GLOB headers CONFIGURE_DEPENDS ${src}/*.h)
  foreach(h ${headers})
    get_filename_component(base ${h} NAME)
    file(CREATE_LINK ${h} ${view}/public/${name}/${base} SYMBOLIC)
  endforeach()

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${src}/*.cpp)
  if(L_CUDA AND TANDEM_CUDA_ENABLED)
    file(GLOB_RECURSE cuda_sources CONFIGURE_DEPENDS ${src}/*.cu)
    list(APPEND sources ${cuda_sources})
  endif()
  add_library(tandem_${name} STATIC ${sources})
  if(L_CUDA AND TANDEM_CUDA_ENABLED)
    target_compile_options(tandem_${name} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${TANDEM_CUDA_FLAGS}>")
    target_compile_definitions(tandem_${name} PUBLIC TANDEM_HAVE_CUDA=1)
    list(APPEND L_LIBS CUDA::cudart_static)
  endif()
  target_include_directories(tandem_${name} PRIVATE ${view}/own INTERFACE ${view}/public)
  list(TRANSFORM L_PUBLIC PREPEND tandem_)
  list(TRANSFORM L_PRIVATE PREPEND tandem_)
  target_link_libraries(tandem_${name} PUBLIC ${L_PUBLIC} ${L_LIBS}
                        PRIVATE ${L_PRIVATE} ${L_PRIVATE_LIBS})
endfunction()

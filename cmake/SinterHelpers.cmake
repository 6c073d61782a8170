# Build-time helpers for Sinter's own CMakeLists (not installed): AUTO/ON/OFF switches and warning flags.
include_guard(GLOBAL)

# Declares cache STRING `var` holding AUTO, ON or OFF and normalizes what the user gave (yes, 1, true...).
function(sinter_switch var doc)
  set(${var} AUTO CACHE STRING "${doc} (AUTO: on when found; ON: required; OFF)")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${var}}" value)
  if(value STREQUAL "AUTO")
    set(value AUTO)
  elseif(${var})
    set(value ON)
  else()
    set(value OFF)
  endif()
  set(${var} ${value} PARENT_SCOPE)
endfunction()

# Reports a missing dependency: fatal when its switch is ON, a status line when it is AUTO.
function(sinter_not_found switch what hint)
  if(${switch} STREQUAL "ON")
    message(FATAL_ERROR "${switch}=ON, but ${what} was not found. ${hint}")
  endif()
  message(STATUS "${switch}: ${what} not found, so it is off. ${hint}")
endfunction()

function(sinter_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    set(werror_cxx $<$<BOOL:${SINTER_WERROR}>:-Werror>)
    set(werror_cuda $<$<BOOL:${SINTER_WERROR}>:-Xcompiler=-Werror>)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra ${werror_cxx}>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra ${werror_cuda}>)
  endif()
endfunction()

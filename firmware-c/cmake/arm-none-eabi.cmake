# Toolchain for Debian's gcc-arm-none-eabi + newlib (nano). FIRMWARE_CPU picks
# the core: cortex-m3 (default; QEMU lm3s6965evb), cortex-m0, cortex-m4f.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(FIRMWARE_CPU "cortex-m3" CACHE STRING "cortex-m0, cortex-m3 or cortex-m4f")
if(FIRMWARE_CPU STREQUAL "cortex-m0")
  set(_cpu "-mcpu=cortex-m0 -mthumb -mfloat-abi=soft")
elseif(FIRMWARE_CPU STREQUAL "cortex-m4f")
  set(_cpu "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16")
else()
  set(_cpu "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft")
endif()
set(CMAKE_C_FLAGS_INIT "${_cpu} -ffunction-sections -fdata-sections")
set(CMAKE_ASM_FLAGS_INIT "${_cpu}")
# --no-warn-execstack: newlib's objects carry no .note.GNU-stack (meaningless on bare metal).
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_cpu} --specs=nano.specs -nostartfiles -Wl,--gc-sections -Wl,--no-warn-execstack")

/* tests/tools/python_offsets.c - the CPython structure offsets gsymprof's
 * table (userspace/process/python_runtime.cpp, python_layout) holds, measured
 * by the compiler from an interpreter's own headers. Compiled by
 * tests/unit/process/python_runtime_test.cpp against every CPython 3.11+ it
 * finds (cc -DPy_BUILD_CORE -I INCLUDE -I INCLUDE/internal) and compared
 * with the table, so the table cannot drift from the headers unseen.
 *
 * Prints "NAME VALUE" lines (decimal), NAME as the PythonLayout member; a
 * member a version lacks is not printed (the table holds kPythonAbsent).
 * Unicode state bits are measured by setting each bitfield in a zeroed
 * object and finding the bits that changed, because bitfield order is the
 * compiler's choice. Not part of the build: it needs the target's headers.
 *
 * 3.13 renamed members and dropped _PyCFrame: the thread state holds the
 * current frame (printed as tstate_cframe, cframe_current_frame absent),
 * the frame's code is f_executable, its instruction instr_ptr. Its layout
 * comes from the _Py_DebugOffsets at the start of _PyRuntime: the
 * debug_offsets_* lines say where in that struct python_runtime.cpp reads
 * each offset and how big it is, checked against the header too. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PRINT(name, value) printf("%s %lu\n", name, (unsigned long)(value))

/* The first bit of the state word at offsetof(PyASCIIObject, state) that
 * differs between a zeroed object and `object`. */
static unsigned state_shift(const PyASCIIObject* object) {
  uint32_t word;
  memcpy(&word, (const char*)object + offsetof(PyASCIIObject, state), sizeof word);
  for (unsigned bit = 0; bit < 32; ++bit)
    if (word & (UINT32_C(1) << bit)) return bit;
  return 99;
}

int main(void) {
  PRINT("hexversion", PY_VERSION_HEX);
  /* The BPF walk: runtime -> interpreters -> threads -> frames. */
#if PY_VERSION_HEX < 0x030C0000
  PRINT("runtime_tstate_current", offsetof(_PyRuntimeState, gilstate.tstate_current));
#endif
  PRINT("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
  PRINT("interp_threads_head", offsetof(PyInterpreterState, threads.head));
  PRINT("tstate_next", offsetof(PyThreadState, next));
  PRINT("tstate_interp", offsetof(PyThreadState, interp));
  PRINT("tstate_thread_id", offsetof(PyThreadState, thread_id));
  PRINT("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#if PY_VERSION_HEX < 0x030D0000
  PRINT("tstate_cframe", offsetof(PyThreadState, cframe));
  PRINT("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  PRINT("frame_code", offsetof(_PyInterpreterFrame, f_code));
  PRINT("frame_prev_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
  PRINT("tstate_cframe", offsetof(PyThreadState, current_frame));
  PRINT("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  PRINT("frame_prev_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  PRINT("frame_previous", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX < 0x030C0000
  PRINT("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#else
  PRINT("frame_owned_by_cstack", FRAME_OWNED_BY_CSTACK);
#endif
  PRINT("frame_owner", offsetof(_PyInterpreterFrame, owner));
  PRINT("frame_owned_by_generator", FRAME_OWNED_BY_GENERATOR);
  PRINT("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));

  /* Naming: objects, code objects, strings, bytes, types. */
  PRINT("object_type", offsetof(PyObject, ob_type));
  PRINT("var_object_size", offsetof(PyVarObject, ob_size));
  PRINT("type_name", offsetof(PyTypeObject, tp_name));
  PRINT("type_flags", offsetof(PyTypeObject, tp_flags));
  PRINT("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
  PRINT("code_filename", offsetof(PyCodeObject, co_filename));
  PRINT("code_name", offsetof(PyCodeObject, co_name));
  PRINT("code_qualname", offsetof(PyCodeObject, co_qualname));
  PRINT("code_linetable", offsetof(PyCodeObject, co_linetable));
  PRINT("unicode_length", offsetof(PyASCIIObject, length));
  PRINT("unicode_state", offsetof(PyASCIIObject, state));
  PRINT("unicode_ascii_size", sizeof(PyASCIIObject));
  PRINT("unicode_compact_size", sizeof(PyCompactUnicodeObject));

  PyASCIIObject object;
  memset(&object, 0, sizeof object);
  object.state.kind = 7;
  PRINT("unicode_kind_shift", state_shift(&object));
  memset(&object, 0, sizeof object);
  object.state.compact = 1;
  PRINT("unicode_compact_shift", state_shift(&object));
  memset(&object, 0, sizeof object);
  object.state.ascii = 1;
  PRINT("unicode_ascii_shift", state_shift(&object));
#if PY_VERSION_HEX < 0x030C0000
  memset(&object, 0, sizeof object);
  object.state.ready = 1;
  PRINT("unicode_ready_shift", state_shift(&object));
#endif

  PRINT("bytes_size", offsetof(PyBytesObject, ob_base.ob_size));
  PRINT("bytes_data", offsetof(PyBytesObject, ob_sval));

#if PY_VERSION_HEX >= 0x030D0000
  /* Where in _Py_DebugOffsets each offset python_runtime.cpp reads lies. */
#define DEBUG_OFFSET(name, member) PRINT("debug_offsets_" name, offsetof(_Py_DebugOffsets, member))
  PRINT("debug_offsets_bytes", sizeof(_Py_DebugOffsets));
  DEBUG_OFFSET("version", version);
  DEBUG_OFFSET("free_threaded", free_threaded);
  DEBUG_OFFSET("runtime_size", runtime_state.size);
  DEBUG_OFFSET("runtime_interpreters_head", runtime_state.interpreters_head);
  DEBUG_OFFSET("interp_size", interpreter_state.size);
  DEBUG_OFFSET("interp_threads_head", interpreter_state.threads_head);
  DEBUG_OFFSET("tstate_size", thread_state.size);
  DEBUG_OFFSET("tstate_next", thread_state.next);
  DEBUG_OFFSET("tstate_interp", thread_state.interp);
  DEBUG_OFFSET("tstate_current_frame", thread_state.current_frame);
  DEBUG_OFFSET("tstate_thread_id", thread_state.thread_id);
  DEBUG_OFFSET("tstate_native_thread_id", thread_state.native_thread_id);
  DEBUG_OFFSET("frame_size", interpreter_frame.size);
  DEBUG_OFFSET("frame_previous", interpreter_frame.previous);
  DEBUG_OFFSET("frame_executable", interpreter_frame.executable);
  DEBUG_OFFSET("frame_instr_ptr", interpreter_frame.instr_ptr);
  DEBUG_OFFSET("frame_owner", interpreter_frame.owner);
  DEBUG_OFFSET("code_size", code_object.size);
  DEBUG_OFFSET("code_filename", code_object.filename);
  DEBUG_OFFSET("code_name", code_object.name);
  DEBUG_OFFSET("code_qualname", code_object.qualname);
  DEBUG_OFFSET("code_linetable", code_object.linetable);
  DEBUG_OFFSET("code_firstlineno", code_object.firstlineno);
  DEBUG_OFFSET("code_adaptive", code_object.co_code_adaptive);
  DEBUG_OFFSET("object_size", pyobject.size);
  DEBUG_OFFSET("object_type", pyobject.ob_type);
  DEBUG_OFFSET("type_size", type_object.size);
  DEBUG_OFFSET("type_name", type_object.tp_name);
  DEBUG_OFFSET("type_flags", type_object.tp_flags);
  DEBUG_OFFSET("bytes_size", bytes_object.size);
  DEBUG_OFFSET("bytes_ob_size", bytes_object.ob_size);
  DEBUG_OFFSET("bytes_data", bytes_object.ob_sval);
  DEBUG_OFFSET("unicode_size", unicode_object.size);
  DEBUG_OFFSET("unicode_state", unicode_object.state);
  DEBUG_OFFSET("unicode_length", unicode_object.length);
  DEBUG_OFFSET("unicode_ascii_size", unicode_object.asciiobject_size);
#undef DEBUG_OFFSET
#endif
  return 0;
}

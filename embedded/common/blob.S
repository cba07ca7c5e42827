/* A file linked into flash byte for byte, between the symbols
 * <BLOB_NAME>_start and <BLOB_NAME>_end: the model (read in place by
 * wisp_gguf_open) or a training text. BLOB_FILE is the path of a file the
 * build made (never one committed to the repository). GGUF tensor data is
 * aligned relative to the file start, so blobs start 64-byte aligned. */
#define JOIN2(a, b) a##b
#define JOIN(a, b) JOIN2(a, b)
    .section .rodata_blob, "a"
    .balign 64
    .global JOIN(BLOB_NAME, _start), JOIN(BLOB_NAME, _end)
JOIN(BLOB_NAME, _start):
    .incbin BLOB_FILE
JOIN(BLOB_NAME, _end):

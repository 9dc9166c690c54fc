/*
 * indexed_write.c - Megatron-LM's .bin/.idx from every rank's part; see
 * indexed_write.h.
 *
 * Rank 0 creates both files at their full size and writes the header; each
 * rank then pwrites its tokens, lengths, pointers and document indices at
 * offsets that the counts of the ranks before it give. Nothing passes
 * between ranks but those counts, and no rank holds more than a buffer of
 * its part in memory.
 */
#include "indexed_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "comm.h"
#include "fail.h"
#include "file_check.h"

enum { COPY_BUF = 1 << 20, HEADER_BYTES = 9 + 8 + 1 + 8 + 8 };

int indexed_dtype_for_vocab(int32_t vocab)
{
    return vocab <= 65536 ? INDEXED_UINT16 : INDEXED_INT32;
}

int indexed_dtype_size(int code)
{
    return code == INDEXED_UINT16 ? 2 : 4;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int write_at(int fd, const void *buf, size_t n, off_t at)
{
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 1;
        p += w, n -= (size_t)w, at += w;
    }
    return 0;
}

/* Copies a temporary file to fd at offset. */
static int copy_file(FILE *from, int fd, off_t at, int64_t bytes, char *buf)
{
    rewind(from);
    while (bytes > 0) {
        size_t n = bytes < COPY_BUF ? (size_t)bytes : COPY_BUF;
        if (fread(buf, 1, n, from) != n || write_at(fd, buf, n, at))
            return 1;
        at += (off_t)n, bytes -= (int64_t)n;
    }
    return 0;
}

/* The pointers (int64 byte offsets) and document indices (int64) of this
 * rank's documents, computed from its lengths as they are read back. */
static int write_pointers(const IndexedPart *part, int fd, off_t ptr_at, off_t doc_at, int64_t first_doc,
                          int64_t first_token, int size, char *buf)
{
    /* 4 + 8 + 8 bytes an entry: 32 leaves buf's three arrays room and
     * 8-byte alignment */
    enum { BATCH = COPY_BUF / 32 };
    int32_t *lens = (int32_t *)buf;
    int64_t *ptrs = (int64_t *)(buf + BATCH * 4), *docs = ptrs + BATCH;
    int64_t token = first_token, done = 0;
    rewind(part->lengths);
    while (done < part->n_docs) {
        size_t n = part->n_docs - done < BATCH ? (size_t)(part->n_docs - done) : BATCH;
        if (fread(lens, 4, n, part->lengths) != n)
            return 1;
        for (size_t i = 0; i < n; i++) {
            ptrs[i] = token * size;
            token += lens[i];
            docs[i] = first_doc + done + (int64_t)i + 1;
        }
        if (write_at(fd, ptrs, n * 8, ptr_at + (off_t)(done * 8)) ||
            write_at(fd, docs, n * 8, doc_at + (off_t)(done * 8)))
            return 1;
        done += (int64_t)n;
    }
    return 0;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int indexed_write(const Grid *g, const char *prefix, int dtype_code, const IndexedPart *part, int force)
{
    int rank = g->layout.rank, size = g->layout.size;
    char bin[4096], idx[4096], bin_tmp[4200], idx_tmp[4200], msg[8400] = "";
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    /* the temporary names carry rank 0's pid, so two runs never share them */
    int tag = (int)getpid();
    comm_bcast_bytes(g, COMM_WORLD, &tag, sizeof tag, 0);
    snprintf(bin_tmp, sizeof bin_tmp, "%s.tmp-%d", bin, tag);
    snprintf(idx_tmp, sizeof idx_tmp, "%s.tmp-%d", idx, tag);

    int64_t counts[2] = {part->n_tokens, part->n_docs};
    int64_t *all = TRI_MALLOC((size_t)size * sizeof counts, "the dataset's write buffers");
    char *buf = TRI_MALLOC(COPY_BUF, "the dataset's write buffers");
    comm_gather_bytes(g, COMM_WORLD, counts, sizeof counts, all, 0);
    comm_bcast_bytes(g, COMM_WORLD, all, (size_t)size * sizeof counts, 0);
    int64_t first_token = 0, first_doc = 0, total_tokens = 0, total_docs = 0;
    for (int r = 0; r < size; r++) {
        if (r < rank)
            first_token += all[2 * r], first_doc += all[2 * r + 1];
        total_tokens += all[2 * r], total_docs += all[2 * r + 1];
    }
    free(all);
    int tsize = indexed_dtype_size(dtype_code);
    off_t len_at = HEADER_BYTES, ptr_at = len_at + 4 * (off_t)total_docs;
    off_t doc_at = ptr_at + 8 * (off_t)total_docs;
    off_t idx_bytes = doc_at + 8 * ((off_t)total_docs + 1);

    int rc = 0, fd_bin = -1, fd_idx = -1;
    char why[256];
    if (rank == 0) {
        unsigned char head[HEADER_BYTES + 8];
        memcpy(head, "MMIDIDX\0\0", 9);
        put_u64(head + 9, 1);
        head[17] = (unsigned char)dtype_code;
        put_u64(head + 18, (uint64_t)total_docs);
        put_u64(head + 26, (uint64_t)total_docs + 1);
        put_u64(head + HEADER_BYTES, 0); /* the first document index */
        if (!force && (exists(bin) || exists(idx))) {
            snprintf(msg, sizeof msg, "trident: tokenize --output %s: %s exists; trident does not overwrite a dataset (--force replaces it)\n",
                     prefix, exists(bin) ? bin : idx);
            rc = 1;
        } else if ((fd_bin = file_open_regular(bin_tmp, O_WRONLY | O_CREAT | O_TRUNC, why, sizeof why)) < 0 ||
                   (fd_idx = file_open_regular(idx_tmp, O_WRONLY | O_CREAT | O_TRUNC, why, sizeof why)) < 0) {
            snprintf(msg, sizeof msg, "trident: tokenize --output %s: cannot create %s: %s\n", prefix,
                     fd_bin < 0 ? bin_tmp : idx_tmp, why);
            rc = 1;
        } else if (ftruncate(fd_bin, (off_t)total_tokens * tsize) || ftruncate(fd_idx, idx_bytes) ||
                   write_at(fd_idx, head, sizeof head, 0)) {
            snprintf(msg, sizeof msg, "trident: tokenize --output %s: cannot size or write %s: %s\n", prefix, idx_tmp,
                     strerror(errno));
            rc = 1;
        }
    }
    if (fail_report(comm_mpi(g, COMM_WORLD), rc, msg)) {
        if (fd_bin >= 0)
            close(fd_bin), unlink(bin_tmp);
        if (fd_idx >= 0)
            close(fd_idx), unlink(idx_tmp);
        free(buf);
        return 1;
    }
    if (rank != 0) {
        fd_bin = file_open_regular(bin_tmp, O_WRONLY, why, sizeof why);
        fd_idx = fd_bin < 0 ? -1 : file_open_regular(idx_tmp, O_WRONLY, why, sizeof why);
        if (fd_idx < 0) {
            snprintf(msg, sizeof msg, "trident: tokenize --output %s: cannot open %s on this rank (is the output on a file system every rank sees?): %s\n",
                     prefix, fd_bin < 0 ? bin_tmp : idx_tmp, why);
            rc = 1;
        }
    }
    if (!rc) {
        if (copy_file(part->tokens, fd_bin, (off_t)first_token * tsize, part->n_tokens * tsize, buf) ||
            copy_file(part->lengths, fd_idx, len_at + 4 * (off_t)first_doc, part->n_docs * 4, buf) ||
            write_pointers(part, fd_idx, ptr_at + 8 * (off_t)first_doc, doc_at + 8 * ((off_t)first_doc + 1),
                           first_doc, first_token, tsize, buf) ||
            fsync(fd_bin) || fsync(fd_idx)) {
            snprintf(msg, sizeof msg, "trident: tokenize --output %s: writing this rank's part failed: %s\n", prefix,
                     strerror(errno ? errno : EIO));
            rc = 1;
        }
    }
    if (fd_bin >= 0)
        close(fd_bin);
    if (fd_idx >= 0)
        close(fd_idx);
    free(buf);
    if (fail_report(comm_mpi(g, COMM_WORLD), rc, msg)) {
        if (rank == 0)
            unlink(bin_tmp), unlink(idx_tmp);
        return 1;
    }
    /* the index last: a .idx beside a .bin means both are complete */
    if (rank == 0 && (rename(bin_tmp, bin) || rename(idx_tmp, idx))) {
        snprintf(msg, sizeof msg, "trident: tokenize --output %s: cannot rename the finished files into place: %s\n",
                 prefix, strerror(errno));
        unlink(bin_tmp), unlink(idx_tmp);
        rc = 1;
    }
    return fail_report(comm_mpi(g, COMM_WORLD), rc, msg);
}

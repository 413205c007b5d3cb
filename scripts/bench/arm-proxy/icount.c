/*
 * TCG plugin for scripts/bench/arm-proxy-bench.sh: counts the guest instructions executed and,
 * optionally, the bytes loaded, and the instructions executed per translated block.
 *
 *   qemu-aarch64 -plugin ./libicount.so[,loads=on][,blocks=N] -d plugin -D out.txt PROG ...
 *
 * Writes "insns <count>" and "load_bytes <count>" (loads=on) to the plugin log at exit, and
 * with blocks=N the N blocks that executed the most instructions as "block <vaddr> <insns>".
 * Instruction counts are added inline (no helper call per block). Load bytes are added inline
 * too, per executed load instruction, with the size decoded from its encoding (load_size):
 * qemu 7.2's memory callbacks (qemu_plugin_register_vcpu_mem_cb, and the inline variant) fire
 * only on the first executions of a translated block, so a program loading a 1 MiB buffer ten
 * times counted about 1 MiB. Counters are shared by all guest threads without atomics: exact
 * for the single-threaded runs the benchmark makes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>
#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

typedef struct {
    uint64_t vaddr;
    uint64_t n_insns;
    uint64_t execs;
} Block;

static uint64_t insns;
static uint64_t load_bytes;
static bool count_loads;
static guint64 top_blocks;
static GHashTable *blocks;
static GMutex lock;

/*
 * The bytes an A64 instruction loads, 0 for any other (stores, prefetches, SVE, and the rare
 * atomics and load-acquire forms). Encodings from the Arm ARM, "Loads and Stores".
 */
static unsigned load_size(uint32_t i)
{
    unsigned size = i >> 30, v = (i >> 26) & 1, opc = (i >> 22) & 3;
    if ((i & 0x3b000000) == 0x39000000 || (i & 0x3b200000) == 0x38000000 ||
        (i & 0x3b200c00) == 0x38200800) {
        /* LDR/LDUR/LDRS* (immediate, unscaled, pre/post-indexed, register offset). */
        if (v) {
            return opc == 1 ? 1u << size : opc == 3 && size == 0 ? 16 : 0;
        }
        if (opc == 0 || (size == 3 && opc == 2) || (size == 3 && opc == 3)) {
            return 0; /* store, PRFM */
        }
        return 1u << size;
    }
    if ((i & 0x3a000000) == 0x28000000) {
        /* LDP/LDNP/LDPSW (all index forms): L is bit 22. */
        if (!((i >> 22) & 1)) {
            return 0;
        }
        return v ? 2 * (4u << size) : 2 * (size == 2 ? 8 : 4);
    }
    if ((i & 0x3b000000) == 0x18000000) {
        /* LDR (literal). */
        return v ? 4u << size : size == 3 ? 0 : size == 1 ? 8 : 4;
    }
    if ((i & 0xbfff0000) == 0x0c400000 || (i & 0xbfe00000) == 0x0cc00000) {
        /* LD1-LD4 (multiple structures), no offset or post-indexed. */
        static const unsigned regs[16] = {4, 0, 4, 0, 3, 0, 3, 1, 2, 0, 2, 0, 0, 0, 0, 0};
        return regs[(i >> 12) & 15] * ((i >> 30) & 1 ? 16 : 8);
    }
    if ((i & 0xbfdf0000) == 0x0d400000 || (i & 0xbfc00000) == 0x0dc00000) {
        /* LD1-LD4 (single structure) and LD1R-LD4R. */
        unsigned op = (i >> 13) & 7, selem = (((op & 1) << 1) | ((i >> 21) & 1)) + 1;
        unsigned sz = (i >> 10) & 3, bytes;
        if (op >= 6) {
            bytes = 1u << sz;
        } else if (op >= 4) {
            bytes = sz & 1 ? 8 : 4;
        } else {
            bytes = op >= 2 ? 2 : 1;
        }
        return selem * bytes;
    }
    return 0;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, n);
    if (count_loads) {
        for (size_t i = 0; i < n; i++) {
            struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
            uint32_t word;
            if (qemu_plugin_insn_size(insn) != sizeof word) {
                continue;
            }
            memcpy(&word, qemu_plugin_insn_data(insn), sizeof word);
            unsigned bytes = load_size(word);
            if (bytes) {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                           &load_bytes, bytes);
            }
        }
    }
    if (top_blocks) {
        uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
        g_mutex_lock(&lock);
        Block *b = g_hash_table_lookup(blocks, &vaddr);
        if (!b) {
            b = g_new0(Block, 1);
            b->vaddr = vaddr;
            b->n_insns = n;
            g_hash_table_insert(blocks, &b->vaddr, b);
        }
        g_mutex_unlock(&lock);
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->execs, 1);
    }
}

static gint by_insns(gconstpointer a, gconstpointer b)
{
    const Block *x = *(Block *const *)a, *y = *(Block *const *)b;
    uint64_t cx = x->execs * x->n_insns, cy = y->execs * y->n_insns;
    return cx < cy ? 1 : cx > cy ? -1 : 0;
}

static void report(qemu_plugin_id_t id, void *p)
{
    GString *out = g_string_new(NULL);
    g_string_append_printf(out, "insns %" PRIu64 "\n", insns);
    if (count_loads) {
        g_string_append_printf(out, "load_bytes %" PRIu64 "\n", load_bytes);
    }
    if (top_blocks) {
        GPtrArray *all = g_ptr_array_new();
        GHashTableIter it;
        gpointer key, value;
        g_hash_table_iter_init(&it, blocks);
        while (g_hash_table_iter_next(&it, &key, &value)) {
            g_ptr_array_add(all, value);
        }
        g_ptr_array_sort(all, by_insns);
        for (guint i = 0; i < all->len && i < top_blocks; i++) {
            const Block *b = g_ptr_array_index(all, i);
            g_string_append_printf(out, "block 0x%" PRIx64 " %" PRIu64 "\n", b->vaddr,
                                   b->execs * b->n_insns);
        }
        g_ptr_array_free(all, TRUE);
    }
    qemu_plugin_outs(out->str);
    g_string_free(out, TRUE);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (g_str_has_prefix(argv[i], "loads=")) {
            if (!qemu_plugin_bool_parse("loads", argv[i] + 6, &count_loads)) {
                fprintf(stderr, "icount: bad option %s\n", argv[i]);
                return -1;
            }
        } else if (g_str_has_prefix(argv[i], "blocks=")) {
            top_blocks = g_ascii_strtoull(argv[i] + 7, NULL, 10);
        } else {
            fprintf(stderr, "icount: unknown option %s\n", argv[i]);
            return -1;
        }
    }
    blocks = g_hash_table_new(g_int64_hash, g_int64_equal);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, report, NULL);
    return 0;
}

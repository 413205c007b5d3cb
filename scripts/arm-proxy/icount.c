/*
 * TCG plugin for scripts/arm-proxy-bench.sh: counts the guest instructions executed and,
 * optionally, the bytes loaded, and the instructions executed per translated block.
 *
 *   qemu-aarch64 -plugin ./libicount.so[,loads=on][,blocks=N] -d plugin -D out.txt PROG ...
 *
 * Writes "insns <count>" and "load_bytes <count>" (loads=on) to the plugin log at exit, and
 * with blocks=N the N blocks that executed the most instructions as "block <vaddr> <insns>".
 * Instruction counts are added inline (no helper call per block); load bytes need a callback
 * per load, which makes emulation a few times slower. Counters are shared by all guest
 * threads without atomics: exact for the single-threaded runs the benchmark makes.
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

static void on_load(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    load_bytes += 1u << qemu_plugin_mem_size_shift(info);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, n);
    if (count_loads) {
        for (size_t i = 0; i < n; i++) {
            qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_load,
                                             QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_R, NULL);
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

/* The layout of an ext2/3/4 file system, read with libext2fs: which of its
 * blocks are metadata and which are the journal (see fsmap.h for the list).
 *
 * The device is opened fresh for every scan, read-only, without the MMP
 * check and ignoring checksum errors: on a mounted file system the device's
 * view lags the page cache, so a descriptor or an inode may be caught half
 * written, and a stale view is corrected by the next scan anyway.  What
 * cannot be read is skipped and counted, never fatal — except the
 * superblock and group descriptors (the device is not ext2/3/4, or is
 * unreadable) and an inode scan that breaks off, which fail the scan so
 * that a caller keeps its previous map instead of withdrawing hints.
 *
 * Groups.  For each group, ext2fs_super_and_bgd_loc2 says whether it holds
 * a superblock copy and how many blocks follow it: the old-style group
 * descriptor table plus the reserved GDT blocks of the resize inode, or
 * (meta_bg, in the first, second and last group of a meta group) one
 * descriptor block; these blocks are contiguous from the group's superblock
 * (or descriptor) block.  Bitmaps and inode tables are where the
 * descriptors say, which covers flex_bg's packing.  Sparse_super2's two
 * backups come out of ext2fs_bg_has_super like the others.  On a 1 KiB
 * file system block 0 (the boot block) is not hinted.
 *
 * Inodes.  One pass with ext2fs_get_next_inode_full over the inode tables
 * (groups with an uninitialised table are skipped by libext2fs).  An inode
 * is in use when its mode and link count are not zero and its deletion
 * time is.  Directories, slow symlinks, the resize inode, quota inodes and
 * the orphan file are metadata block by block: the extent API walks every
 * extent (index nodes too), or ext2fs_block_iterate3 walks an indirect map.
 * Other inodes (regular files) give only their mapping's own blocks: the
 * extent tree is walked along index entries only (each entry's child block
 * is metadata; leaf nodes are not read), and an indirect map gives its
 * indirect blocks (double and triple indirect blocks are read for the
 * addresses of the blocks below them; single indirect blocks are not
 * read).  An inode's external extended-attribute block is metadata too.
 * The journal inode (s_journal_inum) is journal, block by block; an
 * external journal lives on another device and is only noted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <et/com_err.h>
#include <ext2fs/ext2fs.h>
#include <ext2fs/ext3_extents.h>
#include <pthread.h>

#include "fsmap/fsmap.h"

static const struct hc_hint META = { .cls = HC_CLASS_METADATA };
static const struct hc_hint JOURNAL = { .cls = HC_CLASS_JOURNAL };

struct layout {
  ext2_filsys fs;
  struct hc_fsmap_builder *b;
  struct hc_fsmap_stats *st;
  uint64_t offset;
  blk64_t nblocks; /* the file system's size in blocks */
  int rc;          /* a fatal error (ENOMEM, ERANGE): stops the scan */
  /* A run of blocks being collected by an iterator callback. */
  blk64_t run_start, run_len;
  struct hc_hint run_hint;
  /* hc_fsmap_scan_structures: each group structure, named (b is NULL). */
  hc_fsmap_name_fn *name;
  void *arg;
};

/* Registers libext2fs's error table with com_err, once. */
static void
ext2_errors_init (void)
{
  initialize_ext2_error_table ();
}

const char *
hc_fsmap_ext2_why (long e)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;

  switch (e) {
  case EXT2_ET_BAD_MAGIC: return "not an ext2/3/4 file system (bad superblock magic)";
  case EXT2_ET_SHORT_READ: return "short read (the device is smaller than the file system)";
  case EXT2_ET_UNSUPP_FEATURE:
  case EXT2_ET_RO_UNSUPP_FEATURE: return "the file system has features this libext2fs lacks";
  case EXT2_ET_CORRUPT_SUPERBLOCK: return "corrupt superblock";
  case EXT2_ET_SB_CSUM_INVALID: return "superblock checksum mismatch";
  case EXT2_ET_GDESC_READ:
  case EXT2_ET_GDESC_BAD_BLOCK_MAP:
  case EXT2_ET_GDESC_BAD_INODE_MAP:
  case EXT2_ET_GDESC_BAD_INODE_TABLE: return "corrupt group descriptors";
  default: break;
  }
  if (e > 0 && e < 4096)
    return strerror ((int) e);
  pthread_once (&once, ext2_errors_init);
  const char *m = error_message (e);
  /* com_err's fallback for a code it does not know is "Unknown code …". */
  return m && strncmp (m, "Unknown code", 12) != 0 ? m : NULL;
}

/* A negative errno for a libext2fs error code. */
static int
ext2_errno (errcode_t e)
{
  if (e > 0 && e < 4096)
    return -(int) e;
  switch (e) {
  case EXT2_ET_BAD_MAGIC:
  case EXT2_ET_CORRUPT_SUPERBLOCK: return -EINVAL;
  case EXT2_ET_UNSUPP_FEATURE:
  case EXT2_ET_RO_UNSUPP_FEATURE: return -EOPNOTSUPP;
  default: return -EIO;
  }
}

/* Fails the scan with code e: fills st->why and returns the errno. */
static int
fail (struct hc_fsmap_stats *st, const char *device, const char *what, errcode_t e)
{
  const char *why = hc_fsmap_ext2_why ((long) e);

  st->ext2_error = (long) e;
  if (why)
    snprintf (st->why, sizeof st->why, "%s: %s: %s", device, what, why);
  else
    snprintf (st->why, sizeof st->why, "%s: %s: libext2fs error %ld", device, what, (long) e);
  return ext2_errno (e);
}

/* Adds blocks [blk, blk+count) with hint; blocks outside the file system
 * (a corrupt pointer) are dropped. */
static void
add_blocks (struct layout *l, blk64_t blk, blk64_t count, struct hc_hint hint)
{
  uint64_t bs = l->fs->blocksize, start, len;
  int rc;

  if (l->rc < 0 || count == 0 || blk >= l->nblocks || !l->b)
    return;
  if (count > l->nblocks - blk)
    count = l->nblocks - blk;
  start = (uint64_t) blk * bs;
  len = (uint64_t) count * bs;
  if (start > UINT64_MAX - l->offset) {
    l->rc = -ERANGE;
    snprintf (l->st->why, sizeof l->st->why, "the offset puts block %llu past 2^64",
              (unsigned long long) blk);
    return;
  }
  if ((rc = hc_fsmap_add (l->b, l->offset + start, len, hint, HC_FSMAP_PRIO_LAYOUT)) < 0) {
    l->rc = rc;
    snprintf (l->st->why, sizeof l->st->why, "%s",
              rc == -ERANGE ? "the offset puts the file system past 2^64" : "out of memory");
    return;
  }
  if (hint.cls == HC_CLASS_JOURNAL)
    l->st->layout_journal += len;
}

/* ---------------------------------------------------------------------------
 * Groups
 */
/* Names blocks [blk, blk+count) "what(gG)" for hc_fsmap_scan_structures. */
static void
name_blocks (struct layout *l, blk64_t blk, blk64_t count, const char *what, dgrp_t g)
{
  char name[48];
  int rc;

  if (!l->name || l->rc < 0 || count == 0 || blk >= l->nblocks)
    return;
  if (count > l->nblocks - blk)
    count = l->nblocks - blk;
  snprintf (name, sizeof name, "%s(%sg%lu)", what,
            strcmp (what, "superblock") ? "" : g ? "backup " : "primary ", (unsigned long) g);
  if ((rc = l->name (l->arg, l->offset + (uint64_t) blk * l->fs->blocksize,
                     (uint64_t) count * l->fs->blocksize, name)) < 0)
    l->rc = rc;
}

static void
scan_groups (struct layout *l)
{
  ext2_filsys fs = l->fs;

  for (dgrp_t g = 0; g < fs->group_desc_count && l->rc == 0; g++) {
    blk64_t super = 0, old_desc = 0, new_desc = 0, loc;
    blk_t used = 0;

    if (ext2fs_super_and_bgd_loc2 (fs, g, &super, &old_desc, &new_desc, &used) == 0 && used > 0) {
      bool has_super = ext2fs_bg_has_super (fs, g);
      if (has_super)
        add_blocks (l, super, used, META);
      else if (new_desc)
        add_blocks (l, new_desc, used, META);
      /* The names: a superblock block, then old-style descriptors and the
       * reserved GDT blocks, or one meta_bg descriptor block. */
      if (has_super)
        name_blocks (l, super, 1, "superblock", g);
      if (old_desc) {
        blk64_t n = used - (has_super ? 1 : 0) - (new_desc ? 1 : 0);
        blk64_t d = ext2fs_has_feature_meta_bg (fs->super) ? fs->super->s_first_meta_bg
                                                            : fs->desc_blocks;
        if (d > n)
          d = n;
        name_blocks (l, old_desc, d, "group_descriptors", g);
        name_blocks (l, old_desc + d, n - d, "reserved_gdt", g);
      }
      if (new_desc)
        name_blocks (l, new_desc, 1, "group_descriptors", g);
    }
    if ((loc = ext2fs_block_bitmap_loc (fs, g))) {
      add_blocks (l, loc, 1, META);
      name_blocks (l, loc, 1, "block_bitmap", g);
    }
    if ((loc = ext2fs_inode_bitmap_loc (fs, g))) {
      add_blocks (l, loc, 1, META);
      name_blocks (l, loc, 1, "inode_bitmap", g);
    }
    if ((loc = ext2fs_inode_table_loc (fs, g))) {
      add_blocks (l, loc, fs->inode_blocks_per_group, META);
      name_blocks (l, loc, fs->inode_blocks_per_group, "inode_table", g);
    }
  }
  if (ext2fs_has_feature_mmp (fs->super) && fs->super->s_mmp_block)
    add_blocks (l, fs->super->s_mmp_block, 1, META);
}

/* ---------------------------------------------------------------------------
 * Inodes
 */

/* Collects runs of blocks from ext2fs_block_iterate3. */
static void
run_flush (struct layout *l)
{
  if (l->run_len)
    add_blocks (l, l->run_start, l->run_len, l->run_hint);
  l->run_len = 0;
}

static int
iterate_cb (ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt, blk64_t ref_blk,
            int ref_offset, void *arg)
{
  struct layout *l = arg;

  (void) fs, (void) blockcnt, (void) ref_blk, (void) ref_offset;
  if (*blocknr == 0)
    return 0;
  if (l->run_len && l->run_start + l->run_len == *blocknr)
    l->run_len++;
  else {
    run_flush (l);
    l->run_start = *blocknr;
    l->run_len = 1;
  }
  return l->rc < 0 ? BLOCK_ABORT : 0;
}

/* Every block of an inode (data and mapping) with hint.  Returns 0 or the
 * libext2fs error that stopped the walk. */
static errcode_t
all_blocks (struct layout *l, ext2_ino_t ino, struct ext2_inode *inode, struct hc_hint hint)
{
  errcode_t e;

  if (inode->i_flags & EXT4_EXTENTS_FL) {
    ext2_extent_handle_t h;
    struct ext2fs_extent ex;

    if ((e = ext2fs_extent_open2 (l->fs, ino, inode, &h)))
      return e;
    e = ext2fs_extent_get (h, EXT2_EXTENT_ROOT, &ex);
    while (e == 0 && l->rc == 0) {
      if (!(ex.e_flags & EXT2_EXTENT_FLAGS_SECOND_VISIT)) {
        if (ex.e_flags & EXT2_EXTENT_FLAGS_LEAF)
          add_blocks (l, ex.e_pblk, ex.e_len, hint);
        else
          add_blocks (l, ex.e_pblk, 1, hint); /* the child node */
      }
      e = ext2fs_extent_get (h, EXT2_EXTENT_NEXT, &ex);
    }
    ext2fs_extent_free (h);
    return e == EXT2_ET_EXTENT_NO_NEXT ? 0 : e;
  }
  l->run_len = 0;
  l->run_hint = hint;
  e = ext2fs_block_iterate3 (l->fs, ino, BLOCK_FLAG_READ_ONLY, NULL, iterate_cb, l);
  run_flush (l);
  return e;
}

/* The extent tree's node blocks of an inode, walking index entries only. */
static errcode_t
extent_nodes (struct layout *l, ext2_ino_t ino, struct ext2_inode *inode)
{
  const struct ext3_extent_header *eh = (const void *) inode->i_block;
  ext2_extent_handle_t h;
  struct ext2fs_extent ex;
  struct ext2_extent_info info;
  errcode_t e;

  if (ext2fs_le16_to_cpu (eh->eh_magic) != EXT3_EXT_MAGIC)
    return EXT2_ET_EXTENT_HEADER_BAD;
  if (ext2fs_le16_to_cpu (eh->eh_depth) == 0)
    return 0; /* the whole map is in the inode */
  l->st->tree_files++;
  if ((e = ext2fs_extent_open2 (l->fs, ino, inode, &h)))
    return e;
  e = ext2fs_extent_get (h, EXT2_EXTENT_ROOT, &ex);
  while (e == 0 && l->rc == 0) {
    if ((e = ext2fs_extent_get_info (h, &info)))
      break;
    if (!(ex.e_flags & EXT2_EXTENT_FLAGS_LEAF)) {
      add_blocks (l, ex.e_pblk, 1, META);
      /* Descend only to index nodes; leaf nodes are not read. */
      if (info.curr_level + 1 < info.max_depth) {
        e = ext2fs_extent_get (h, EXT2_EXTENT_DOWN, &ex);
        continue;
      }
    }
    /* The next entry: a sibling, climbing up as needed. */
    while ((e = ext2fs_extent_get (h, EXT2_EXTENT_NEXT_SIB, &ex)) == EXT2_ET_EXTENT_NO_NEXT) {
      if ((e = ext2fs_extent_get_info (h, &info)))
        break;
      if (info.curr_level == 0) {
        e = EXT2_ET_EXTENT_NO_NEXT;
        break;
      }
      if ((e = ext2fs_extent_get (h, EXT2_EXTENT_UP, &ex)))
        break;
    }
  }
  ext2fs_extent_free (h);
  return e == EXT2_ET_EXTENT_NO_NEXT ? 0 : e;
}

/* The indirect blocks of an indirect map: blk itself, and when level > 1
 * the blocks it points to, recursively (level 1: a single indirect block,
 * not read). */
static errcode_t
indirect (struct layout *l, blk64_t blk, int level)
{
  uint32_t per = l->fs->blocksize / 4;
  errcode_t e;

  if (blk == 0 || blk >= l->nblocks)
    return 0;
  add_blocks (l, blk, 1, META);
  if (level == 1)
    return 0;
  char *buf = malloc (l->fs->blocksize);
  if (!buf)
    return EXT2_ET_NO_MEMORY;
  if ((e = ext2fs_read_ind_block (l->fs, (blk_t) blk, buf)) == 0)
    for (uint32_t i = 0; i < per && e == 0 && l->rc == 0; i++)
      e = indirect (l, ((uint32_t *) buf)[i], level - 1);
  free (buf);
  return e;
}

static errcode_t
indirect_nodes (struct layout *l, struct ext2_inode *inode)
{
  errcode_t e;

  if (!inode->i_block[EXT2_IND_BLOCK] && !inode->i_block[EXT2_DIND_BLOCK]
      && !inode->i_block[EXT2_TIND_BLOCK])
    return 0;
  l->st->tree_files++;
  if ((e = indirect (l, inode->i_block[EXT2_IND_BLOCK], 1)))
    return e;
  if ((e = indirect (l, inode->i_block[EXT2_DIND_BLOCK], 2)))
    return e;
  return indirect (l, inode->i_block[EXT2_TIND_BLOCK], 3);
}

/* Maps one in-use inode. */
static void
scan_inode (struct layout *l, ext2_ino_t ino, struct ext2_inode *inode)
{
  struct ext2_super_block *sb = l->fs->super;
  errcode_t e = 0;
  blk64_t acl;

  l->st->inodes++;
  if ((acl = ext2fs_file_acl_block (l->fs, inode)))
    add_blocks (l, acl, 1, META);
  if (!ext2fs_inode_has_valid_blocks2 (l->fs, inode))
    return; /* inline data, fast symlinks, devices, fifos, sockets */
  if (ext2fs_has_feature_journal (sb) && ino == sb->s_journal_inum)
    e = all_blocks (l, ino, inode, JOURNAL);
  else if (ino == EXT2_RESIZE_INO || ino == sb->s_usr_quota_inum || ino == sb->s_grp_quota_inum
           || ino == sb->s_prj_quota_inum || ino == sb->s_orphan_file_inum)
    e = all_blocks (l, ino, inode, META);
  else if (ino < EXT2_FIRST_INODE (sb) && ino != EXT2_ROOT_INO)
    return; /* the bad-blocks list and other reserved inodes */
  else if (LINUX_S_ISDIR (inode->i_mode)) {
    l->st->dirs++;
    e = all_blocks (l, ino, inode, META);
  } else if (LINUX_S_ISLNK (inode->i_mode))
    e = all_blocks (l, ino, inode, META);
  else if (inode->i_flags & EXT4_EXTENTS_FL)
    e = extent_nodes (l, ino, inode);
  else
    e = indirect_nodes (l, inode);
  if (e)
    l->st->dir_errors++;
}

static int
scan_inodes (struct layout *l, const char *device)
{
  ext2_filsys fs = l->fs;
  int isize = EXT2_INODE_SIZE (fs->super);
  struct ext2_inode *inode = malloc ((size_t) isize);
  ext2_inode_scan scan;
  ext2_ino_t ino;
  errcode_t e;
  int rc = 0;

  if (!inode) {
    snprintf (l->st->why, sizeof l->st->why, "out of memory");
    return -ENOMEM;
  }
  if ((e = ext2fs_open_inode_scan (fs, 0, &scan))) {
    free (inode);
    return fail (l->st, device, "opening the inode scan", e);
  }
  ext2fs_inode_scan_flags (scan, EXT2_SF_SKIP_MISSING_ITABLE | EXT2_SF_WARN_GARBAGE_INODES, 0);
  while (l->rc == 0) {
    e = ext2fs_get_next_inode_full (scan, &ino, inode, isize);
    if (e == EXT2_ET_BAD_BLOCK_IN_INODE_TABLE || e == EXT2_ET_INODE_CSUM_INVALID
        || e == EXT2_ET_INODE_IS_GARBAGE) {
      l->st->inode_errors++;
      continue;
    }
    if (e) {
      rc = fail (l->st, device, "reading inodes", e);
      break;
    }
    if (ino == 0)
      break;
    if (inode->i_mode == 0 || inode->i_links_count == 0 || inode->i_dtime != 0)
      continue;
    scan_inode (l, ino, inode);
  }
  ext2fs_close_inode_scan (scan);
  free (inode);
  return rc;
}

int
hc_fsmap_scan_layout (const char *device, uint64_t offset, struct hc_fsmap_builder *b,
                      struct hc_fsmap_stats *st)
{
  struct layout l = { .b = b, .st = st, .offset = offset };
  int flags = EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS;
  errcode_t e;
  int rc;

#ifdef EXT2_FLAG_SKIP_MMP
  flags |= EXT2_FLAG_SKIP_MMP;
#endif
  st->layout = true;
  if ((e = ext2fs_open2 (device, NULL, flags, 0, 0, unix_io_manager, &l.fs)))
    return fail (st, device, "opening", e);
  st->block_size = l.fs->blocksize;
  st->groups = l.fs->group_desc_count;
  l.nblocks = ext2fs_blocks_count (l.fs->super);
  if (ext2fs_has_feature_journal (l.fs->super) && l.fs->super->s_journal_inum == 0)
    st->external_journal = true;
  scan_groups (&l);
  rc = l.rc;
  if (rc == 0)
    rc = scan_inodes (&l, device);
  if (rc == 0)
    rc = l.rc;
  ext2fs_close_free (&l.fs);
  return rc;
}

int
hc_fsmap_scan_structures (const char *device, uint64_t offset, hc_fsmap_name_fn *name, void *arg,
                          struct hc_fsmap_stats *st)
{
  struct layout l = { .st = st, .offset = offset, .name = name, .arg = arg };
  int flags = EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS;
  errcode_t e;

#ifdef EXT2_FLAG_SKIP_MMP
  flags |= EXT2_FLAG_SKIP_MMP;
#endif
  if ((e = ext2fs_open2 (device, NULL, flags, 0, 0, unix_io_manager, &l.fs)))
    return fail (st, device, "opening", e);
  l.nblocks = ext2fs_blocks_count (l.fs->super);
  scan_groups (&l);
  ext2fs_close_free (&l.fs);
  return l.rc;
}

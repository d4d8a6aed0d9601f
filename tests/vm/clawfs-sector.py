#!/usr/bin/env python3
"""Where a block of the /clawfs file system lies on the VM's disk.

Reads on stdin the key=value facts that clawfs_layout_facts (clawfs-tamper.sh)
printed in the guest, prints the byte offset on the whole disk of the file
system block `block` (the first block of the tamper canary).

Two layouts:
  plain      ext4 straight on the partition (images before /clawfs was
             encrypted): partition start + block.
  integrity  ext4 on dm-crypt on dm-integrity on the partition (LUKS2 with
             --integrity): dm-crypt maps its sector s to s + crypt_offset of
             the dm-integrity device, which interleaves runs of tags with runs
             of data after its superblock and journal. The arithmetic is the
             kernel's own (drivers/md/dm-integrity.c, Linux 6.12:
             calculate_journal_section_size, calculate_device_limits,
             get_area_and_offset, get_data_sector), fed with the geometry in
             the device's superblock.
"""
import sys

SECTOR = 512
SB_SECTORS = 8
JOURNAL_BLOCK_SECTORS = 8
JOURNAL_SECTOR_DATA = SECTOR - 8  # a sector less its commit id
JOURNAL_MAC_PER_SECTOR = 8
JOURNAL_ENTRY_ROUNDUP = 8
METADATA_PADDING_SECTORS = 8
SB_FLAG_HAVE_JOURNAL_MAC = 0x1
SB_FLAG_FIXED_PADDING = 0x8


def round_up(n, to):
    return (n + to - 1) // to * to


def le(raw, at, size):
    return int.from_bytes(raw[at:at + size], "little")


def integrity_data_sector(sb, start, sector):
    """Sector of the partition holding `sector` of a dm-integrity device
    whose superblock `sb` is at `start` (sectors) of the partition."""
    if sb[:8] != b"integrt\0":
        sys.exit(f"not a dm-integrity superblock: {sb[:8]!r}")
    log2_interleave = sb[9]
    tag_size = le(sb, 10, 2)
    journal_sections = le(sb, 12, 4)
    flags = le(sb, 24, 4)
    log2_sectors_per_block = sb[28]
    sectors_per_block = 1 << log2_sectors_per_block

    # calculate_journal_section_size
    entry_size = round_up(8 + 8 * sectors_per_block + tag_size, JOURNAL_ENTRY_ROUNDUP)
    sector_space = JOURNAL_SECTOR_DATA
    if flags & SB_FLAG_HAVE_JOURNAL_MAC:
        sector_space -= JOURNAL_MAC_PER_SECTOR
    section_entries = (sector_space // entry_size) * JOURNAL_BLOCK_SECTORS
    section_sectors = (section_entries << log2_sectors_per_block) + JOURNAL_BLOCK_SECTORS
    # calculate_device_limits
    initial_sectors = SB_SECTORS + section_sectors * journal_sections
    padding = (METADATA_PADDING_SECTORS << 9) if flags & SB_FLAG_FIXED_PADDING \
        else (1 << 9 << METADATA_PADDING_SECTORS)
    metadata_run = round_up(tag_size << (log2_interleave - log2_sectors_per_block), padding) >> 9
    # get_area_and_offset, get_data_sector
    area = sector >> log2_interleave
    offset = sector & ((1 << log2_interleave) - 1)
    return (start + initial_sectors + (area << log2_interleave)
            + (area + 1) * metadata_run + offset)


def main():
    facts = dict(word.split("=", 1) for word in sys.stdin.read().split())
    part_start = int(facts["partition_start_sector"])
    sector = int(facts["block"]) * int(facts["block_size"]) // SECTOR
    if facts["layout"] == "plain":
        on_partition = sector
    elif facts["layout"] == "integrity":
        sb = bytes.fromhex(facts["integrity_superblock"])
        on_partition = integrity_data_sector(
            sb, int(facts["integrity_start"]), sector + int(facts["crypt_offset"]))
    else:
        sys.exit(f"unknown layout {facts['layout']}")
    print((part_start + on_partition) * SECTOR)


if __name__ == "__main__":
    main()

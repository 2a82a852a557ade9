"""What a run writes: result records, the report and its pictures, page, trace and comparison."""

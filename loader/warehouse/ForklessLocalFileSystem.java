/*
 * Hadoop's local file system, but setting a file's or folder's permissions in this process.
 *
 * Without Hadoop's native library (not on Maven Central, so not among the pinned jars),
 * RawLocalFileSystem sets the permissions of every file and folder it creates by running
 * `chmod` in a child process: about 7 ms each, twice per file with its checksum file. A merge's
 * commit writes several files, and every local Spark job of the loader writes through here.
 * java.nio sets the same mode bits without a process. Built by `make setup` with the Java
 * compiler PySpark ships (Janino); loader/warehouse/local_fs.py says when jobs use it.
 */
package loader.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

public class ForklessLocalFileSystem extends LocalFileSystem {
    public ForklessLocalFileSystem() {
        super(new Raw());
    }

    public static class Raw extends RawLocalFileSystem {
        // Bit i of a mode (others' execute first) is BITS[i].
        private static final PosixFilePermission[] BITS = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
            PosixFilePermission.OWNER_READ,
        };

        public void setPermission(Path p, FsPermission permission) throws IOException {
            // The sticky bit (Hadoop's only bit past these nine) has no java.nio form: chmod sets it.
            if (permission.getStickyBit()) {
                super.setPermission(p, permission);
                return;
            }
            int mode = permission.toShort();
            Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
            for (int i = 0; i < BITS.length; i++) {
                if ((mode & (1 << i)) != 0) {
                    set.add(BITS[i]);
                }
            }
            Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
        }
    }
}

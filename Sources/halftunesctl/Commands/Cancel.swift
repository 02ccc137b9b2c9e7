import ArgumentParser
import HalfTunesKit

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a task.",
        discussion: "With --resume-data, the resume data is printed alone on stdout; pass it to "
            + "`halftunesctl download --resume-data` to continue from the same byte.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The task id.") var id: Int64
    @Flag(name: .long, help: "Produce resume data to continue the download later.") var resumeData = false

    func run() throws {
        let result = try options.client().cancel(id, produceResumeData: resumeData)
        if options.json { return try Console.json(result) }
        guard resumeData else { return Console.out("Task \(id) canceled at \(TaskText.progress(result.task))") }
        if let data = result.resumeData {
            Console.out(data)
        } else {
            Console.note("Task \(id) canceled; no resume data could be produced (resuming needs bytes on disk "
                + "and an ETag or Last-Modified from the server)")
        }
    }
}

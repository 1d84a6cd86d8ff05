module example.com/app

go 1.26.0

require github.com/sendtwice/sendtwice v0.0.0
